// The "agreement with Nsight Compute" check of fib's GPU timer (docs/gpu-timing.md).
//
// Eight kernels whose times span about 5 us to 5 ms (a 16-byte copy kernel over four sizes, a
// compute-bound fp32 FMA kernel over four lengths), each timed with fib's event timer (L2 flush
// on, blocking kernel, median of >= 100 samples; also the median less the measured empty event
// pair) and with its CUPTI mode. Prints one line per kernel and writes a JSON file. With --ncu-reps
// N it instead launches each kernel N times, plainly, for Nsight Compute to time
// (scripts/device/ncu-check.sh runs both and compares).
//
//   fib_timing_check [--json PATH] [--samples N]
//   fib_timing_check --ncu-reps N
//
// Each case is its own template instance (fib_check_copy<3>), so a profiler's kernel name says
// which case it ran.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "fib/cuda/runtime.h"
#include "fib/cuda/timing.h"

namespace {

template <int kCase>
__global__ void fib_check_copy(const int4* __restrict__ src, int4* __restrict__ dst, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    dst[i] = src[i];
  }
}

// Eight independent FMA chains per thread: bound by the FP32 pipes, not by latency.
template <int kCase>
__global__ void fib_check_fma(float* out, int iterations, float a, float b) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  float x[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] = static_cast<float>(tid + j) * 1e-7f;
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = fmaf(x[j], a, b);
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += x[j];
  out[tid] = s;
}

enum class Kind { kCopy, kFma };
struct Case {
  const char* name;
  Kind kind;
  std::size_t bytes;  // copy: bytes read (and as many written)
  int iterations;     // fma: iterations of the eight chains
};
// Sized for an H100/H200 (about 3-4 TB/s, 132 SMs): about 5 us to 5 ms.
constexpr Case kCases[] = {
    {"copy_2MiB", Kind::kCopy, std::size_t{2} << 20, 0},
    {"copy_16MiB", Kind::kCopy, std::size_t{16} << 20, 0},
    {"copy_128MiB", Kind::kCopy, std::size_t{128} << 20, 0},
    {"copy_1GiB", Kind::kCopy, std::size_t{1} << 30, 0},
    {"fma_64", Kind::kFma, 0, 64},
    {"fma_1k", Kind::kFma, 0, 1024},
    {"fma_16k", Kind::kFma, 0, 16384},
    {"fma_80k", Kind::kFma, 0, 81920},
};
constexpr int kCaseCount = static_cast<int>(sizeof(kCases) / sizeof(kCases[0]));

struct Buffers {
  void* src = nullptr;
  void* dst = nullptr;
  float* out = nullptr;
  unsigned copy_blocks = 0, fma_blocks = 0;
};

template <int kCase>
void launch_case(const Buffers& b, cudaStream_t s) {
  const Case& c = kCases[kCase];
  if (c.kind == Kind::kCopy) {
    fib_check_copy<kCase><<<b.copy_blocks, 512, 0, s>>>(static_cast<const int4*>(b.src),
                                                        static_cast<int4*>(b.dst),
                                                        static_cast<long long>(c.bytes / 16));
  } else {
    fib_check_fma<kCase><<<b.fma_blocks, 256, 0, s>>>(b.out, c.iterations, 0.999f, 0.001f);
  }
  FIB_CUDA_CHECK_LAUNCH();
}

template <int... kI>
void launch_by_index(int i, const Buffers& b, cudaStream_t s, std::integer_sequence<int, kI...>) {
  ((i == kI ? launch_case<kI>(b, s) : void()), ...);
}

void launch(int i, const Buffers& b, cudaStream_t s) {
  launch_by_index(i, b, s, std::make_integer_sequence<int, kCaseCount>{});
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path = "timing_check.json";
  int ncu_reps = 0;
  std::size_t samples = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--ncu-reps" && i + 1 < argc) {
      ncu_reps = std::atoi(argv[++i]);
    } else if (a == "--samples" && i + 1 < argc) {
      samples = static_cast<std::size_t>(std::atol(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--samples N] | --ncu-reps N\n", argv[0]);
      return 2;
    }
  }
  try {
    std::string why;
    if (!fib::cuda::available(&why)) {
      std::fprintf(stderr, "fib_timing_check: no CUDA device (%s)\n", why.c_str());
      return 1;
    }
    const fib::cuda::DeviceInfo info = fib::cuda::device_info(0);
    fib::cuda::set_device(0);
    fib::cuda::Stream stream;
    std::size_t max_bytes = 0;
    for (const Case& c : kCases) max_bytes = std::max(max_bytes, c.bytes);
    fib::cuda::DeviceBuffer src(max_bytes), dst(max_bytes);
    Buffers b;
    b.src = src.data();
    b.dst = dst.data();
    b.copy_blocks = static_cast<unsigned>(info.sm_count * 4);
    b.fma_blocks = static_cast<unsigned>(info.sm_count * 8);
    fib::cuda::DeviceBuffer out(static_cast<std::size_t>(b.fma_blocks) * 256 * sizeof(float));
    b.out = static_cast<float*>(out.data());
    // Data that is not all zeros (a copy of zeros can be cheaper on some memory systems).
    std::vector<unsigned char> host(std::size_t{1} << 20);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 131 + 7);
    for (std::size_t off = 0; off < max_bytes; off += host.size()) {
      FIB_CUDA_CHECK(cudaMemcpy(static_cast<char*>(src.data()) + off, host.data(),
                                std::min(host.size(), max_bytes - off), cudaMemcpyHostToDevice));
    }

    if (ncu_reps > 0) {
      // Plain launches for Nsight Compute (it flushes caches and times each one itself).
      for (int i = 0; i < kCaseCount; ++i) {
        for (int r = 0; r < ncu_reps; ++r) launch(i, b, stream.get());
        stream.synchronize();
      }
      std::printf("fib_timing_check: %d cases x %d launches done\n", kCaseCount, ncu_reps);
      return 0;
    }

    // A correctness check of the copy kernel (what it times is a real copy).
    launch(0, b, stream.get());
    stream.synchronize();
    std::vector<unsigned char> back(kCases[0].bytes);
    FIB_CUDA_CHECK(cudaMemcpy(back.data(), dst.data(), back.size(), cudaMemcpyDeviceToHost));
    if (std::memcmp(back.data(), host.data(), std::min(back.size(), host.size())) != 0) {
      std::fprintf(stderr, "fib_timing_check: the copy kernel copied wrong bytes\n");
      return 1;
    }

    fib::cuda::TimingOptions o;
    o.mode = fib::cuda::TimingMode::kEvents;
    o.warmup = 10;
    o.max_iterations = samples;
    o.max_seconds = 20;
    o.l2_flush = true;
    fib::cuda::Timer timer(0, stream.get(), o);
    fib::Json cases = fib::Json::array();
    fib::Json method, cupti_method;
    std::printf("%-12s %-18s %10s %10s %10s %12s %11s %5s\n", "case", "kernel", "events_us",
                "p10_us", "p90_us", "events-ovh", "cupti_us", "n");
    std::vector<fib::cuda::TimingResult> event_results;
    for (int i = 0; i < kCaseCount; ++i) {
      event_results.push_back(timer.measure([&](cudaStream_t s) { launch(i, b, s); }));
    }
    // CUPTI after every event measurement, so its activity recording cannot touch those.
    timer.options().mode = fib::cuda::TimingMode::kCupti;
    std::vector<fib::cuda::TimingResult> cupti_results;
    for (int i = 0; i < kCaseCount; ++i) {
      cupti_results.push_back(timer.measure([&](cudaStream_t s) { launch(i, b, s); }));
    }
    for (int i = 0; i < kCaseCount; ++i) {
      const Case& c = kCases[i];
      const fib::cuda::TimingResult& r = event_results[static_cast<std::size_t>(i)];
      const fib::cuda::TimingResult& cr = cupti_results[static_cast<std::size_t>(i)];
      const double med = percentile(r.samples_ms, 0.5) * 1e3;
      const double p10 = percentile(r.samples_ms, 0.1) * 1e3;
      const double p90 = percentile(r.samples_ms, 0.9) * 1e3;
      const double overhead = r.method.event_overhead_ms * 1e3;
      const double cupti_med = percentile(cr.samples_ms, 0.5) * 1e3;
      const std::string kernel =
          std::string(c.kind == Kind::kCopy ? "fib_check_copy<" : "fib_check_fma<") +
          std::to_string(i) + ">";
      std::printf("%-12s %-18s %10.3f %10.3f %10.3f %12.3f %11.3f %5zu\n", c.name, kernel.c_str(),
                  med, p10, p90, med - overhead, cupti_med, r.samples_ms.size());
      if (r.samples_ms.size() < 100 || cr.samples_ms.size() < 100) {
        std::fprintf(stderr, "fib_timing_check: fewer than 100 samples for %s\n", c.name);
      }
      fib::Json j{{"case", i},
                  {"name", c.name},
                  {"kernel", kernel},
                  {"fib_median_us", med},
                  {"fib_p10_us", p10},
                  {"fib_p90_us", p90},
                  {"event_overhead_us", overhead},
                  {"fib_minus_overhead_median_us", med - overhead},
                  {"cupti_median_us", cupti_med},
                  {"samples", r.samples_ms.size()},
                  {"cupti_samples", cr.samples_ms.size()},
                  {"blocking_kernel", r.method.blocking_kernel},
                  {"clocks_before", fib::cuda::to_json(r.clocks_before)},
                  {"clocks_after", fib::cuda::to_json(r.clocks_after)}};
      if (c.kind == Kind::kCopy) j["bytes_moved"] = 2.0 * static_cast<double>(c.bytes);
      cases.push_back(std::move(j));
    }
    method = fib::cuda::to_json(event_results.front().method);
    cupti_method = fib::cuda::to_json(cupti_results.front().method);

    // What the flush does to a copy that fits in the L2 (16 MiB read + 16 MiB written).
    timer.options().mode = fib::cuda::TimingMode::kEvents;
    timer.options().l2_flush = false;
    const double warm_copy =
        percentile(timer.measure([&](cudaStream_t s) { launch(1, b, s); }).samples_ms, 0.5) * 1e3;
    std::printf("copy_16MiB without the L2 flush: %.3f us (with: %.3f us)\n", warm_copy,
                cases[1]["fib_median_us"].get<double>());
    const std::time_t now = std::time(nullptr);
    char date[32] = {};
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    fib::Json doc{{"device", info.name},
                  {"driver_version", info.driver_version},
                  {"runtime_version", info.runtime_version},
                  {"date", date},
                  {"method", method},
                  {"cupti_method", cupti_method},
                  {"copy_16MiB_without_flush_us", warm_copy},
                  {"cases", cases}};
    std::ofstream(json_path) << doc.dump(2) << "\n";
    std::printf("fib_timing_check: wrote %s\n", json_path.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fib_timing_check: %s\n", e.what());
    return 1;
  }
}
