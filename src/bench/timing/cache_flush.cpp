#include <cstdint>

#include "fib/bench/timing.h"

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
