#include "timer.h"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/bench/timing/timing.h"
#include "fib/trace/suggest.h"
#ifdef FIB_HAVE_CUDA
#include "fib/cuda/timing.h"
#endif

namespace fib::bench::detail {

void check_gpu_timer(const std::string& gpu_timer) {
#ifdef FIB_HAVE_CUDA
  if (cuda::gpu_timer_options(gpu_timer)) return;
  const std::vector<std::string> known(cuda::kGpuTimerNames.begin(), cuda::kGpuTimerNames.end());
  throw Error("--gpu-timer", fmt::format("unknown GPU timer '{}'", gpu_timer),
              suggest(gpu_timer, known));
#else
  // Without the CUDA path only the default names a timer (CPU lanes do not use it).
  if (gpu_timer == "events") return;
  throw Error("--gpu-timer", fmt::format("the GPU timer '{}' needs the CUDA path", gpu_timer),
              "this fib was built without it (configure with -DFIB_CUDA=ON)");
#endif
}

std::string timer_description(bool gpu, const std::string& gpu_timer) {
  if (!gpu) return cpu_timer_description();
#ifdef FIB_HAVE_CUDA
  const std::optional<cuda::TimingOptions> options = cuda::gpu_timer_options(gpu_timer);
  if (!options) check_gpu_timer(gpu_timer);  // throws, naming the closest timer
  return cuda::describe(*options) + " (performance.extra has the method per trial)";
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
