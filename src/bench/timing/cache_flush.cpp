#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "fib/bench/timing/timing.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace fib::bench {

namespace {
constexpr std::size_t kLine = 64;
}

#if defined(__x86_64__)
// clflushopt needs its target attribute; every x86-64 CPU fib times on (Skylake+, Zen+) has
// it, and clflush is the fallback for older ones.
__attribute__((target("clflushopt"))) static void flush_lines_opt(const char* p, const char* end) {
  for (; p < end; p += kLine) _mm_clflushopt(const_cast<char*>(p));
}
static void flush_lines(const char* p, const char* end) {
  for (; p < end; p += kLine) _mm_clflush(p);
}
static const bool kHasClflushopt = __builtin_cpu_supports("clflushopt");
#endif

void flush_from_cache(const void* data, std::size_t bytes) {
  if (data == nullptr || bytes == 0) return;
  const auto begin = reinterpret_cast<std::uintptr_t>(data) & ~(kLine - 1);
  const char* p = reinterpret_cast<const char*>(begin);
  const char* end = static_cast<const char*>(data) + bytes;
#if defined(__x86_64__)
  if (kHasClflushopt) {
    flush_lines_opt(p, end);
  } else {
    flush_lines(p, end);
  }
#elif defined(__aarch64__)
  for (; p < end; p += kLine) asm volatile("dc civac, %0" : : "r"(p) : "memory");
#else
  (void)p;
  (void)end;
#endif
}

void flush_fence() {
#if defined(__x86_64__)
  _mm_mfence();
#elif defined(__aarch64__)
  asm volatile("dsb ish" : : : "memory");
#endif
}

}  // namespace fib::bench

namespace fib::bench {

std::size_t last_level_cache_bytes() {
  static const std::size_t bytes = [] {
    std::size_t best = 0;
    // /sys/devices/system/cpu/cpu0/cache/indexN/size ("32768K") is the cache this core sees;
    // sysconf can report a whole socket's L3 summed over its core complexes (384 MiB on a
    // 12-CCD EPYC whose cores each reach 32 MiB), too large to reason about eviction.
    for (int i = 0; i < 8; ++i) {
      std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
      std::size_t v = 0;
      char unit = 0;
      if (in >> v >> unit) best = std::max(best, unit == 'M' ? v << 20 : unit == 'K' ? v << 10 : v);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    for (int name : {_SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE}) {
      if (best > 0) break;
      const long v = ::sysconf(name);
      if (v > 0) best = std::max(best, static_cast<std::size_t>(v));
    }
#endif
    return best > 0 ? best : std::size_t{32} << 20;
  }();
  return bytes;
}

}  // namespace fib::bench
