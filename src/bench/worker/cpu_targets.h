// The CPU worker's targets: a solution called with its inputs in place (views into the
// read-only mapping of the input-set file) and guarded host buffers for its outputs, and a
// native reference. Both flush the caches before timed calls unless the pool of input sets
// evicts itself.
#pragma once

#include <memory>
#include <vector>

#include "fib/bench/runtime/solution_call.h"
#include "fib/reference/reference.h"
#include "host_memory.h"
#include "target.h"
#include "worker_common.h"

namespace fib::bench::detail {

class HostSolutionTarget : public Target {
 public:
  // `backend` outlives the target.
  HostSolutionTarget(const Definition& def, const AxisValues& var, InputSets sets,
                     CallBackend& backend, bool dps);
  void prepare(int set, std::uint64_t call, bool flush) override;
  bool call(std::uint64_t call, Failure* failure) override;
  bool verify(std::uint64_t call, Failure* failure) override;
  std::vector<std::pair<std::string, Tensor>> outputs() override;
  std::map<std::string, std::int64_t> poison() const override { return call_.sentinels(); }
  // Copies the last call's outputs into an arena slot (output o at slot + offsets[o]); an
  // output whose dtype or shape is not the definition's (value-returning) is described in
  // *misshapen instead, as timed call `position`.
  void leave_outputs(std::byte* slot, const std::vector<std::uint64_t>& offsets, int position,
                     std::vector<protocol::MisshapenOutput>* misshapen) const;
  // Every input set against its checksums (a write to a set other than the call's own).
  bool verify_all_inputs(std::uint64_t call, Failure* failure);
  // Time in cache flushes (with the output poisoning between them).
  double cache_flush_ms() const { return flush_ms_; }

 private:
  InputSets sets_;
  SolutionCall call_;
  bool flush_inputs_ = true;
  InputChecksums checksums_;
  std::size_t set_ = 0;
  double flush_ms_ = 0;
  std::vector<fib_value> args_;
};

class HostReferenceTarget : public Target {
 public:
  HostReferenceTarget(const Definition& def, const AxisValues& var, InputSets sets,
                      unsigned threads, std::vector<std::uint64_t> seeds, Json sampling_extra);
  void prepare(int set, std::uint64_t call, bool flush) override;
  bool call(std::uint64_t call, Failure* failure) override;
  bool verify(std::uint64_t, Failure*) override { return true; }
  std::vector<std::pair<std::string, Tensor>> outputs() override;

 private:
  const Definition& def_;
  AxisValues var_;
  InputSets sets_;
  unsigned threads_;
  std::vector<std::uint64_t> seeds_;
  Json sampling_extra_;
  bool flush_inputs_ = true;
  int set_ = 0;
  reference::Outputs out_;
};

}  // namespace fib::bench::detail
