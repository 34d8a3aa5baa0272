// A target's trials under the GPU timer (CUDA builds): the order of a trial's calls, the
// timer's options from the schedule, and the adapter from a DeviceTarget's steps to the timer's
// hooks (before_call: prepare; the call; after_call: verify, and the checked call's outputs
// staged). A call that fails stops the measurement with CallFailed.
#pragma once

#ifdef FIB_HAVE_CUDA

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fib/cuda/timing.h"
#include "gpu_targets.h"

namespace fib::bench::detail {

// The sets a trial's calls use, in order: warmup first (in the first trial at least one: module
// loading belongs there), then the timed ones, cycled if calls are redone.
struct CallOrder {
  std::vector<int> warmup, timed;
  int check_set = -1;
  bool warm = false;  // a later trial: its calls follow the first trial's on this stream
  int set_for(std::size_t i) const {
    if (i < warmup.size()) return warmup[i];
    return timed[(i - warmup.size()) % timed.size()];
  }
};
CallOrder order_of(const TrialPlan& plan, bool first_trial);

// The timer's options for one trial. `timer`: "events" (CUDA events, the empty pair's cost
// subtracted), "events-raw" (not subtracted) or "cupti" (every kernel the call launches, on any
// stream, from CUPTI's activity records).
cuda::TimingOptions timing_options(const Schedule& s, const TrialPlan& plan, const CallOrder& order,
                                   const std::string& timer);

// One trial of a reply, for the solution and the reference alike.
protocol::TrialResult trial_result(const cuda::TimingResult& r,
                                   std::optional<protocol::CheckedCall> checked);

// A failed call inside a measurement.
struct CallFailed : std::runtime_error {
  explicit CallFailed(Failure f) : std::runtime_error(f.message), failure(std::move(f)) {}
  Failure failure;
};

// What a CUDA error during a measurement means for the evaluation (a sticky one: the worker
// exits after its reply).
Failure cuda_failure(const cuda::CudaError& e, std::uint64_t call, WorkerState& st);

class DeviceRunner {
 public:
  // `call_waits_on_device`: what is known of this call across measurements (set once a trial
  // finds that the call waits on the device; later trials and the window audit then skip the
  // blocking kernel, which such a call would hold until it timed out). Null: this runner's own.
  DeviceRunner(GpuWorker& g, DeviceTarget& target, bool* call_waits_on_device = nullptr)
      : g_(g),
        target_(target),
        call_waits_(call_waits_on_device ? call_waits_on_device : &own_call_waits_) {}

  // One trial's warmup and timed calls under the timer, then, where the plan names the checked
  // call's position and the timer stopped before it, that call (one more, exactly like the
  // others but untimed). Throws CallFailed,
  // cuda::TimingError, cuda::CudaError.
  cuda::TimingResult measure_trial(const Schedule& s, const TrialPlan& plan, bool first_trial,
                                   const std::string& timer);
  // `calls` untimed calls over the first trial's timed sets under CUPTI (the last trial's
  // options otherwise): each call's kernels inside its window on the stream.
  cuda::WindowAudit audit_window(const TrialPlan& first, std::size_t calls);

  // The number the next call gets (calls are numbered across trials: the poison changes).
  std::uint64_t next_call() const { return call_number_; }
  // That number, for calls made outside the timer (sampling draws) to advance.
  std::uint64_t* call_counter() { return &call_number_; }
  // The last trial's checked call (drawn among its timed calls as they return, unless the plan
  // names its position): whether there is one, its number, position and poison sentinels.
  bool staged() const { return staged_done_; }
  int staged_position() const { return staged_position_; }
  std::uint64_t staged_call() const { return staged_call_; }
  const std::map<std::string, std::int64_t>& staged_poison() const { return staged_poison_; }

 private:
  void before(std::size_t i);
  void call();
  void after();
  void rewound(std::size_t index);

  GpuWorker& g_;
  DeviceTarget& target_;
  bool own_call_waits_ = false;
  bool* call_waits_;
  std::optional<CallOrder> order_;
  int current_set_ = 0;
  std::size_t current_index_ = 0;
  std::uint64_t call_number_ = 0;
  int check_position_ = -1;
  bool check_wanted_ = false;
  bool staged_done_ = false;
  bool restage_ = false;  // the staged call was dropped with its batch: the next one replaces it
  int staged_position_ = -1;
  std::uint64_t staged_call_ = 0;
  std::map<std::string, std::int64_t> staged_poison_;
};

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
