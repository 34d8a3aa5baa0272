// The reference stage: the one place that answers "the reference's outputs on these input sets
// of a prepared workload". It looks in the reference cache first, else runs the reference (fib's
// native reference in the lane's reference worker, which never loads a solution, or the
// definition's own PyTorch reference through the bridge), each in its own sandbox box, and
// stores what it made. A lane has one stage, which owns its reference worker; the lane's prepare
// step asks it for the reference's run on a workload, a solution's evaluation for the
// reference's outputs on the sets the solution's checked calls drew.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fib/base/device.h"
#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/launch/worker_process.h"
#include "fib/bench/protocol/messages.h"
#include "fib/bench/reference_stage/reference_cache.h"
#include "fib/bench/reference_stage/reference_run.h"
#include "fib/trace/definition.h"
#include "fib/trace/workload.h"

namespace fib::bench::detail {

// How a lane's references run; fixed for the run.
struct ReferenceSetup {
  Device device;           // the lane's
  std::string hardware;    // the lane's, in the reference cache's keys of a run
  std::string gpu_timer;   // --gpu-timer, in those keys too
  double timeout_seconds;  // --timeout: the references' deadlines derive from it
  unsigned threads = 0;    // of the native CPU reference and of torch; 0: all cores
  WorkerSpec worker;       // the native reference worker (its sandbox box: the lane's)
  // The PyTorch reference's interpreter, the bridge's folder and its sandbox (its box: the
  // lane's); null when no definition of the run is checked against its PyTorch reference.
  const PythonRuntime* python = nullptr;
  std::filesystem::path bridge_dir;
  SandboxSpec python_sandbox;
  ReferenceCache* cache = nullptr;  // null: --reference-cache off
};

class ReferenceStage {
 public:
  explicit ReferenceStage(ReferenceSetup setup);
  ~ReferenceStage();                               // stops the reference worker
  ReferenceStage(const ReferenceStage&) = delete;  // owns a worker process
  ReferenceStage& operator=(const ReferenceStage&) = delete;

  // The reference's run on a prepared workload: from the reference cache where it holds the run
  // (same reference, inputs, schedule and hardware), else run and, when it succeeds, stored
  // there. On success p.reference_outputs name each trial's checked outputs; a reference worker
  // that answered with a failure is stopped, so the next workload gets a fresh one.
  ReferenceRun run(const Definition& def, const Workload& w, ReferenceKind kind, PreparedInputs& p);

  // The reference's outputs on each of `sets` (a solution's checked calls, drawn after they ran):
  // the files of the reference's run where it checked that set, else the reference cache's, else
  // files made now by one request to the reference worker (kept in the workload's folder for
  // later evaluations, and stored in the cache). Nullopt with *error set when the reference
  // fails.
  std::optional<std::vector<std::string>> outputs_on_sets(const Definition& def, const Workload& w,
                                                          const PreparedInputs& p,
                                                          const std::vector<int>& sets,
                                                          std::string* error);

  // Stops the reference worker (the next request starts a new one).
  void stop();

 private:
  ReferenceRun run_native(const Definition& def, const Workload& w, PreparedInputs& p);
  std::optional<protocol::ReferenceReply> call(const protocol::ReferenceRequest& request,
                                               std::string* error);
  protocol::ReferenceRequest request(const Definition& def, const Workload& w,
                                     const PreparedInputs& p, protocol::Schedule schedule) const;
  Worker& worker();

  ReferenceSetup setup_;
  std::unique_ptr<Worker> worker_;
};

}  // namespace fib::bench::detail
