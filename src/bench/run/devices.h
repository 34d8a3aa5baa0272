// The devices a run evaluates on (`--device`), one lane each: a lane's evaluations run one at a
// time (each timed evaluation has the device to itself); lanes run in parallel.
#pragma once

#include <deque>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "fib/base/device.h"
#include "fib/bench/launch/worker_process.h"
#include "fib/bench/reference_stage/reference_stage.h"
#include "fib/bench/run/run.h"
#include "fib/trace/json_reader.h"
#include "lane_totals.h"
#ifdef FIB_HAVE_CUDA
#include "fib/cuda/roofline.h"
#endif

namespace fib::bench::detail {

// `--device`: "cpu", or CUDA devices "cuda:0,cuda:1" ("cuda" alone: cuda:0, "cuda:all": every
// visible one).
struct DeviceChoice {
  bool gpu = false;
  std::vector<int> cuda;  // ordinals
};
// Throws fib::Error for text that names no device, or a device this build or host lacks.
DeviceChoice parse_devices(const std::string& text);

// One device's workers and what its traces record about it.
struct Lane {
  Device device;  // traces and worker messages carry it as "cpu" or "cuda:N"
  std::string hardware;
  Json device_json;  // recorded in traces
  std::vector<std::string> cuda_architectures;
#ifdef FIB_HAVE_CUDA
  cuda::DevicePeaks peaks;  // for the roofline of passed evaluations
#endif
  // The worker of the solution being evaluated (`solution_key` names it). A worker runs one
  // solution only: no interpreter, torch or address space is shared with another solution.
  std::unique_ptr<Worker> solution;
  std::string solution_key;  // "<solution name>@<build key>"
  // The workers of the lane's other solutions, stopped (their whole process tree) until their
  // solution's next evaluation: a persistent worker per solution, in the order they were parked.
  struct ParkedWorker {
    std::string key;
    std::unique_ptr<Worker> worker;
  };
  std::deque<ParkedWorker> parked;
  // The lane's references and its reference worker (made once the run's settings are known).
  std::unique_ptr<ReferenceStage> reference;
  std::filesystem::path box;            // the solution worker's sandbox box (empty: unsandboxed)
  std::filesystem::path reference_box;  // the reference worker's
  std::filesystem::path python_reference_box;  // the PyTorch reference's (python_reference.h)
  // GPU lanes: judgements running on the host beside the lane's next evaluations, oldest
  // first. Each records its trace after the one before it, so a lane's traces are recorded in
  // the order it ran them.
  std::deque<std::shared_future<void>> judging;
  LaneTotals totals;  // the lane's share of the run's totals, merged once the lanes stop

  // The lane's solution worker, started anew when there is none or it died.
  Worker& solution_worker(const WorkerSpec& spec);
  // Makes the worker of solution `key` (its name and build) the lane's solution worker: the
  // current one is stopped and parked, `key`'s continued where it was parked (else the next
  // solution_worker() starts one). At most `keep` workers stay parked, holding at most a quarter
  // of the host's memory: beyond that, the one parked last is ended.
  void switch_solution(const std::string& key, std::size_t keep);
  std::uint64_t parked_bytes() const;  // resident, over the parked workers' process trees
  // Ends the parked workers whose solution is not among `names` (the lane moved on to solutions
  // of another definition).
  void keep_parked_only(const std::vector<std::string>& names);
};

// A lane per chosen device: the CPU, or each CUDA device with its properties.
std::vector<std::unique_ptr<Lane>> make_lanes(const DeviceChoice& devices);
// How RunResult::devices names a lane: "cpu", or "cuda:0 (NVIDIA H200)".
std::string lane_label(const Lane& lane);

// How a worker of `role` ("solution" or "reference") is started; its HOME is `home`.
WorkerSpec worker_spec(const RunOptions& o, bool gpu, const std::filesystem::path& home,
                       const std::string& role);

}  // namespace fib::bench::detail
