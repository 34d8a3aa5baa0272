// The timer a run's evaluations are measured with, as the trace names and describes it: the CPU
// timer on CPU lanes, the GPU timer `--gpu-timer` chose on CUDA lanes.
#pragma once

#include <string>

#include "fib/bench/run/run.h"

namespace fib::bench::detail {

// Throws fib::Error (with a suggestion) unless `gpu_timer` is "events", "events-raw" or "cupti".
void check_gpu_timer(const std::string& gpu_timer);

// The trace's environment.extra.timer: how each call was timed, from the timer that timed it.
std::string timer_description(bool gpu, const std::string& gpu_timer);

// performance.extra.method: "cpu", "cuda_events", "cuda_events_raw" or "cupti".
std::string timing_method_name(bool gpu, const std::string& gpu_timer);

inline std::string timer_description(bool gpu, GpuTimer timer) {
  return timer_description(gpu, std::string(option_name(timer)));
}
inline std::string timing_method_name(bool gpu, GpuTimer timer) {
  return timing_method_name(gpu, std::string(option_name(timer)));
}

}  // namespace fib::bench::detail
