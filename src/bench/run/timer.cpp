#include "bench/run/timer.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "fib/trace/diagnostics.h"
#include "fib/trace/suggest.h"
#ifdef FIB_HAVE_CUDA
#include "fib/cuda/timing.h"
#endif

namespace fib::bench::detail {

namespace {

// The CPU worker's timer (bench/worker/worker_main.cpp, fib/bench/timing.h's cache flush).
constexpr const char* kCpuTimer =
    "steady_clock around each call (CLOCK_MONOTONIC); inputs and outputs evicted from the caches "
    "(clflushopt) before every call";

#ifdef FIB_HAVE_CUDA
// The options the GPU worker times with, as far as they change what is measured: "events"
// subtracts the empty event pair's cost, "events-raw" does not, "cupti" reads kernel activity;
// every timed call starts from a flushed L2, behind the blocking kernel.
cuda::TimingOptions gpu_timer_options(const std::string& gpu_timer) {
  cuda::TimingOptions o;
  o.mode = gpu_timer == "cupti" ? cuda::TimingMode::kCupti : cuda::TimingMode::kEvents;
  o.subtract_event_overhead = gpu_timer == "events";
  o.l2_flush = true;
  o.blocking_kernel = true;
  return o;
}
#endif

}  // namespace

void check_gpu_timer(const std::string& gpu_timer) {
  const std::vector<std::string> known{"events", "events-raw", "cupti"};
  if (std::find(known.begin(), known.end(), gpu_timer) == known.end()) {
    throw Error("--gpu-timer", fmt::format("unknown GPU timer '{}'", gpu_timer),
                suggest(gpu_timer, known));
  }
}

std::string timer_description(bool gpu, const std::string& gpu_timer) {
  if (!gpu) return kCpuTimer;
#ifdef FIB_HAVE_CUDA
  return cuda::describe(gpu_timer_options(gpu_timer)) +
         " (performance.extra has the method per trial)";
#else
  throw Error("--gpu-timer", fmt::format("the GPU timer '{}' needs the CUDA path", gpu_timer),
              "this fib was built without it (configure with -DFIB_CUDA=ON)");
#endif
}

std::string timing_method_name(bool gpu, const std::string& gpu_timer) {
  return !gpu                        ? "cpu"
         : gpu_timer == "cupti"      ? "cupti"
         : gpu_timer == "events-raw" ? "cuda_events_raw"
                                     : "cuda_events";
}

}  // namespace fib::bench::detail
