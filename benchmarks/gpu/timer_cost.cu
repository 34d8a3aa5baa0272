// What fib's GPU timer costs in wall time, per mode (docs/gpu-timing.md, "What the timer costs").
//
// CUPTI mode costs more host time per trial than event mode, and where that time goes decides
// whether `fib run --gpu-timer cupti` keeps the GPU busy. This program times the pieces on a short
// kernel (a 2 MiB copy, a few us), each repeated, and prints the median wall time of each:
//   - measure(): one trial as fib run's worker makes it (a first trial with 3 warmup calls, then
//     warm trials; 30 timed calls, no early stop), in events and in CUPTI mode;
//   - the CUPTI session alone: opening it (activity enabled) and closing it (disabled, flushed);
//   - take() on an empty session and after a batch of 16 calls (the forced flush and the
//     records' delivery, names demangled);
//   - a batch of 16 launches after a take() with CUPTI's kernel activity enabled, and without
//     (host time of the launches alone: the first launch, and the median of the other 15).
//
//   fib_timer_cost [--repeat N]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda/cupti_collector.h"
#include "fib/cuda/runtime.h"
#include "fib/cuda/timing.h"

namespace {

__global__ void fib_cost_copy(const int4* __restrict__ src, int4* __restrict__ dst, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    dst[i] = src[i];
  }
}

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median wall time of `repeat` runs of f, in ms.
double median_ms(int repeat, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(ms_since(t0));
  }
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--repeat N]\n", argv[0]);
      return 2;
    }
  }
  try {
    std::string why;
    if (!fib::cuda::available(&why)) {
      std::fprintf(stderr, "fib_timer_cost: no CUDA device (%s)\n", why.c_str());
      return 1;
    }
    const std::size_t bytes = std::size_t{2} << 20;
    void *src = nullptr, *dst = nullptr;
    FIB_CUDA_CHECK(cudaMalloc(&src, bytes));
    FIB_CUDA_CHECK(cudaMalloc(&dst, bytes));
    FIB_CUDA_CHECK(cudaMemset(src, 1, bytes));
    cudaStream_t stream = nullptr;
    FIB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const fib::cuda::Call call = [&](cudaStream_t s) {
      fib_cost_copy<<<264, 512, 0, s>>>(static_cast<const int4*>(src), static_cast<int4*>(dst),
                                        static_cast<long long>(bytes / 16));
      FIB_CUDA_CHECK_LAUNCH();
    };
    // `repeat` rounds of 16 launches, each followed by `after` once the stream is idle: the medians
    // over rounds of the first launch's host time and of the other 15's median, in ms.
    struct LaunchTimes {
      double first = 0, rest = 0;
    };
    auto launch_rounds = [&](const std::function<void()>& after) {
      std::vector<double> first, rest;
      for (int r = 0; r < repeat; ++r) {
        FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
        std::vector<double> t;
        for (int i = 0; i < 16; ++i) {
          const auto t0 = Clock::now();
          call(stream);
          t.push_back(ms_since(t0));
        }
        first.push_back(t.front());
        rest.push_back(median(std::vector<double>(t.begin() + 1, t.end())));
        FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
        after();
      }
      return LaunchTimes{median(first), median(rest)};
    };

    std::printf("fib_timer_cost: median wall time of %d repetitions, ms\n", repeat);
    for (const auto mode : {fib::cuda::TimingMode::kEvents, fib::cuda::TimingMode::kCupti}) {
      fib::cuda::TimingOptions o;
      o.mode = mode;
      o.subtract_event_overhead = mode == fib::cuda::TimingMode::kEvents;
      o.max_iterations = 30;
      o.max_seconds = 10;
      fib::cuda::Timer timer(0, stream, o);
      const char* name = mode == fib::cuda::TimingMode::kEvents ? "events" : "cupti";
      double timed = 0, warm = 0;
      const double first = median_ms(repeat, [&] {
        timer.options().warm = false;
        timer.options().warmup = 3;
        const auto r = timer.measure(call);
        timed = r.method.measure_seconds * 1e3;
        warm = r.method.warmup_seconds * 1e3;
      });
      std::printf(
          "%-6s measure(), first trial (3 warmup calls, 30 timed): %.2f (timed phase %.2f, "
          "warmup %.2f)\n",
          name, first, timed, warm);
      const double later = median_ms(repeat, [&] {
        timer.options().warm = true;
        timer.options().warmup = 0;
        const auto r = timer.measure(call);
        timed = r.method.measure_seconds * 1e3;
      });
      std::printf("%-6s measure(), warm trial (30 timed): %.2f (timed phase %.2f)\n", name, later,
                  timed);
    }

    using fib::cuda::detail::CuptiKernelSession;
    FIB_CUDA_CHECK(cudaDeviceSynchronize());
    const double open_close = median_ms(repeat, [] { CuptiKernelSession session; });
    std::printf("CUPTI session opened and closed, nothing launched: %.3f\n", open_close);
    {
      CuptiKernelSession session;
      const double empty_take = median_ms(repeat, [&] { (void)session.take(); });
      std::printf("take() with no record: %.3f\n", empty_take);
      std::vector<double> take16;
      std::size_t wrong_count = 0;
      const LaunchTimes on = launch_rounds([&] {
        const auto t0 = Clock::now();
        const auto records = session.take();
        take16.push_back(ms_since(t0));
        if (records.size() != 16) wrong_count = records.size();
      });
      if (wrong_count != 0) {
        std::fprintf(stderr, "fib_timer_cost: %zu records for 16 launches\n", wrong_count);
        return 1;
      }
      std::printf(
          "a launch with CUPTI's kernel activity on (host time): the first after a take() "
          "%.4f, the next 15 %.4f each\n",
          on.first, on.rest);
      std::printf("take() after 16 launches (flush, deliver, demangle): %.3f\n", median(take16));
    }
    const LaunchTimes off = launch_rounds([] {});
    std::printf(
        "a launch with CUPTI's kernel activity off (host time): the first %.4f, the next "
        "15 %.4f each\n",
        off.first, off.rest);
    FIB_CUDA_CHECK(cudaStreamDestroy(stream));
    FIB_CUDA_CHECK(cudaFree(src));
    FIB_CUDA_CHECK(cudaFree(dst));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fib_timer_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
