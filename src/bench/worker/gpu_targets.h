// The CUDA worker's targets (CUDA builds): a solution called with device pointers and the
// worker's stream, its outputs in guarded device buffers, checked after every call by one check
// kernel (every input's hash, every output's guards); and a CUDA native reference. What a
// target enqueues runs in order on the worker's stream, so its checks and the copy of a checked
// call's outputs stay outside the timed windows around the calls.
#pragma once

#ifdef FIB_HAVE_CUDA

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fib/bench/runtime/solution_call.h"
#include "gpu_device.h"
#include "target.h"

namespace fib::bench::detail {

class DeviceTarget : public Target {
 public:
  // A trial begins (its checked call not made yet).
  virtual void begin_trial() {}
  // Right after the trial's checked call: its outputs copied aside on the stream, so later calls
  // cannot overwrite them before they are written out.
  virtual void stage_checked() = 0;
  // Those copies, on the device (valid until the next begin_trial or stage_checked).
  virtual std::vector<DeviceOutputRef> staged() const = 0;
  // Waits for the stream; false with *failure when a check since the last settle failed.
  virtual bool settle(Failure* failure) = 0;
};

class DeviceSolutionTarget : public DeviceTarget {
 public:
  // `backend` and `sets` (the worker's device copies of `host`) outlive the target.
  DeviceSolutionTarget(GpuWorker& g, const Definition& def, const AxisValues& var,
                       const std::vector<DeviceSet>& sets, InputSets host, CallBackend& backend,
                       bool dps);
  void prepare(int set, std::uint64_t call, bool flush) override;
  bool call(std::uint64_t call, Failure* failure) override;
  bool verify(std::uint64_t call, Failure* failure) override;
  std::vector<std::pair<std::string, Tensor>> outputs() override;
  std::map<std::string, std::int64_t> poison() const override { return call_.sentinels(); }
  void begin_trial() override;
  void stage_checked() override;
  std::vector<DeviceOutputRef> staged() const override { return staged_meta_; }
  bool settle(Failure* failure) override;

 private:
  const std::vector<fib_value>& arguments(int set);
  std::vector<GuardedBuffer> guarded() const;
  void throw_launch_error();
  std::optional<Failure> check_failure(const gpu::CheckFailure& f);
  std::string modified_input(int index, std::string* where);

  GpuWorker& g_;
  const std::vector<DeviceSet>& sets_;
  InputSets host_;
  SolutionCall call_;
  int current_set_ = 0;
  std::map<int, std::vector<fib_value>> args_;  // by set: device pointers do not move
  std::vector<cuda::DeviceTensor> staged_;      // the checked call's outputs, copied aside
  std::vector<DeviceOutputRef> staged_meta_;    // those copies, dtypes and shapes as returned
};

class DeviceReferenceTarget : public DeviceTarget {
 public:
  DeviceReferenceTarget(GpuWorker& g, const Definition& def, const AxisValues& var,
                        const std::vector<DeviceSet>& sets, std::vector<std::uint64_t> seeds);
  void prepare(int set, std::uint64_t, bool) override { current_set_ = set; }
  // Errors are thrown (CUDA errors among them: a sticky one ends the worker).
  bool call(std::uint64_t call, Failure* failure) override;
  bool verify(std::uint64_t, Failure*) override { return true; }
  std::vector<std::pair<std::string, Tensor>> outputs() override;
  void stage_checked() override { staged_ = last_; }
  std::vector<DeviceOutputRef> staged() const override;
  bool settle(Failure* failure) override;

 private:
  GpuWorker& g_;
  const Definition& def_;
  AxisValues var_;
  const std::vector<DeviceSet>& sets_;
  std::vector<std::uint64_t> seeds_;
  int current_set_ = 0;
  reference_cuda::DeviceOutputs last_, staged_;
};

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
