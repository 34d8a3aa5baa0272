// The worker's CUDA path (`evaluate` and `reference` requests with "device": "cuda:N"): the
// workload's input sets copied to the device once, solutions called with device pointers and
// the worker's stream, timed by fib::cuda::Timer (L2 flush, blocking kernel, events), and after
// every call, outside the timed window, one check kernel: every input's hash against its hash
// at upload (inputs are read-only) and every output's guard regions. The checked call's outputs
// are copied aside on the stream, so nothing later overwrites them. After the trials, a window
// audit under CUPTI checks that each call's kernels ran inside the call's window on the stream
// (work left on a side stream escapes it). A sticky CUDA error (an illegal address) makes the
// worker answer and exit: its context is unusable, and the orchestrator starts a new one.
#ifdef FIB_HAVE_CUDA

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>

#include "fib/bench/eval/op_family.h"
#include "fib/bench/inputs/device_pool.h"
#include "fib/bench/timing/timing.h"
#include "fib/reference_cuda/reference_cuda.h"
#include "gpu_memory.h"
#include "gpu_trials.h"
#include "worker_common.h"

namespace fib::bench::detail {

namespace cu = fib::cuda;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Runs part of the evaluation; what a solution can make go wrong becomes the failure (a part
// returns the failures it finds itself).
std::optional<Failure> guarded(WorkerState& st, const DeviceRunner& runner,
                               const std::function<std::optional<Failure>()>& part) {
  try {
    return part();
  } catch (const CallFailed& e) {
    return e.failure;
  } catch (const cu::TimingError& e) {
    return Failure{"timing", e.what(), runner.next_call()};
  } catch (const cu::CudaError& e) {
    return cuda_failure(e, runner.next_call(), st);
  }
}

std::optional<Failure> settled(DeviceTarget& target) {
  Failure f;
  if (!target.settle(&f)) return f;
  return std::nullopt;
}

// The solution's trials: each measured, checked, and its checked outputs queued for writing.
struct SolutionTrials {
  std::vector<protocol::TrialResult> trials;
  // Where the worker's time goes, beside the timed calls: reported as worker_phases_ms.
  double measure_ms = 0, outputs_ms = 0;
  double call_ms = 0;  // the last trial's median: sizes the window audit
};

std::optional<Failure> run_solution_trials(WorkerState& st, GpuWorker& g, DeviceRunner& runner,
                                           DeviceSolutionTarget& target, const Schedule& schedule,
                                           const std::string& timer, SolutionTrials* out) {
  for (const TrialPlan& plan : schedule.trials) {
    const auto trial_t0 = Clock::now();
    cu::TimingResult result;
    auto failure = guarded(st, runner, [&] {
      result = runner.measure_trial(schedule, plan, &plan == &schedule.trials.front(), timer);
      return settled(target);
    });
    if (failure) return failure;
    out->measure_ms += ms_since(trial_t0);
    const auto outputs_t0 = Clock::now();
    std::optional<protocol::CheckedCall> checked;
    if (!plan.check_output.empty() && runner.staged()) {
      // Copied and written while the next trial runs; complete before the reply.
      g.writer().submit(plan.check_output, target.staged(), {}, g.stream());
      checked = protocol::CheckedCall{runner.staged_call(), runner.staged_poison(),
                                      runner.staged_position()};
    }
    out->outputs_ms += ms_since(outputs_t0);
    if (!result.samples_ms.empty()) out->call_ms = summarize(result.samples_ms).median;
    out->trials.push_back(trial_result(result, std::move(checked)));
  }
  return std::nullopt;
}

Json audit_json(const cu::WindowAudit& audit) {
  Json a{{"available", audit.available}, {"iterations", audit.iterations}};
  if (!audit.note.empty()) a["note"] = audit.note;
  if (audit.escape) a["escape"] = *audit.escape;
  Json ks = Json::array();
  for (const auto& k : audit.kernels) {
    ks.push_back({{"name", k.name},
                  {"stream_id", k.stream_id},
                  {"start_ms", k.start_ms},
                  {"duration_ms", k.duration_ms}});
  }
  a["kernels"] = ks;
  return a;
}

// The window audit: each call's kernels inside its window on the stream. Three calls, fewer
// where they would take more than 50 ms (one 300 ms GEMM call shows escaping work as well as
// three).
std::optional<Failure> run_window_audit(WorkerState& st, DeviceRunner& runner, DeviceTarget& target,
                                        const Schedule& schedule, double call_ms, Json* report) {
  return guarded(st, runner, [&]() -> std::optional<Failure> {
    const std::size_t audit_calls =
        call_ms > 0 ? std::clamp<std::size_t>(static_cast<std::size_t>(50.0 / call_ms), 1, 3) : 3;
    const cu::WindowAudit audit = runner.audit_window(schedule.trials.front(), audit_calls);
    *report = audit_json(audit);
    if (!audit.escape) return settled(target);
    return Failure{
        "side_stream",
        fmt::format("the window audit ({} untimed call{} after the trials, under CUPTI): {}",
                    audit_calls, audit_calls == 1 ? "" : "s", *audit.escape),
        runner.next_call()};
  });
}

// Sampling: many draws on one set for the distribution check.
std::optional<Failure> run_draws(WorkerState& st, DeviceRunner& runner,
                                 DeviceSolutionTarget& target, const Definition& def,
                                 const protocol::SamplingRequest& sp, int* written) {
  std::vector<std::vector<Tensor>> per_output(def.outputs.size());
  auto failure = guarded(st, runner, [&]() -> std::optional<Failure> {
    Failure f;
    if (!draw_samples(target, sp.set, sp.draws, runner.call_counter(), &per_output, &f)) return f;
    return settled(target);
  });
  if (!failure && sp.draws > 0) {
    write_stacked_draws(sp.output, def, per_output, sp.draws);
    *written = sp.draws;
  }
  return failure;
}

Json gpu_json(GpuWorker& g) {
  const cu::DeviceInfo& info = g.timer().device();
  return Json{{"device", g.device()},
              {"name", info.name},
              {"arch", info.arch()},
              {"pci_bus_id", info.pci_bus_id},
              {"driver_version", info.driver_version},
              {"runtime_version", info.runtime_version},
              {"output_guard", output_guard_kind(g.device())}};
}

}  // namespace

// ---- A solution on the device -----------------------------------------------------------------
protocol::EvaluateReply gpu_evaluate(WorkerState& st, const protocol::EvaluateRequest& req) {
  const Definition& def = req.definition;
  GpuWorker& g = gpu_state(st, req.device);
  protocol::EvaluateReply reply;
  SolutionLibrary lib;
  const std::unique_ptr<CallBackend> opened =
      open_backend(st.libraries, req.solution.library, req.solution.symbol, req.solution.binding,
                   req.solution.python, &lib, &reply.load_error);
  if (opened == nullptr) {
    reply.ok = false;
    return reply;
  }
  CallBackend& backend = *opened;
  // Sets a solution wrote are made again from the file, not from the worker's host copy: that
  // is the solution's to reach as well (an mprotect of its mapping).
  if (g.sets_dirty()) st.sets.reset();
  const InputSets host = load_sets(st, req.sets);
  const std::vector<DeviceSet>& sets =
      g.sets(req.sets, host, req.schedule.device_pool, &reply.load_inputs_ms);
  DeviceSolutionTarget target(g, def, req.var_axes, sets, host, backend, req.solution.dps);
  const std::string solution_key =
      req.solution.library + "\n" + req.solution.symbol + "\n" +
      (req.solution.python.is_null() ? "" : req.solution.python.dump());
  DeviceRunner runner(g, target, &g.call_waits_on_device(solution_key));
  reply.signature = lib.signature;

  const auto schedule_t0 = Clock::now();
  SolutionTrials trials;
  std::optional<Failure> failure =
      run_solution_trials(st, g, runner, target, req.schedule, req.gpu_timer, &trials);
  const auto audit_t0 = Clock::now();
  if (!failure) {
    failure =
        run_window_audit(st, runner, target, req.schedule, trials.call_ms, &reply.window_audit);
  }
  const double audit_ms = ms_since(audit_t0);
  if (!failure && req.sampling) {
    failure = run_draws(st, runner, target, def, *req.sampling, &reply.sampling_draws);
  }
  // Every checked output is in its file before the reply names it. After a failure the files
  // are not read (and after a sticky error the copies cannot complete): errors then are moot.
  try {
    g.writer().finish();
  } catch (const std::exception&) {
    if (!failure) throw;
  }
  reply.trials = std::move(trials.trials);
  reply.schedule_ms = ms_since(schedule_t0);
  reply.cache_flush_ms = 0.0;  // the L2 flush runs on the GPU, between the timed windows
  reply.worker_phases_ms = Json{{"trials", trials.measure_ms},
                                {"checked_outputs", trials.outputs_ms},
                                {"window_audit", audit_ms}};
  reply.gpu = gpu_json(g);
  reply.failure = std::move(failure);
  reply.fatal = reply.failure && st.exit_after_reply;
  return reply;
}

// ---- The CUDA reference ----------------------------------------------------------------------
// The trials' errors end the request (ok false), a sticky CUDA error the worker too.
protocol::ReferenceReply gpu_reference(WorkerState& st, const protocol::ReferenceRequest& req) {
  protocol::ReferenceReply reply;
  const reference_cuda::Kernel* k = reference_cuda::find_kernel(req.definition, &reply.error);
  if (k == nullptr) {
    reply.ok = false;
    return reply;
  }
  reply.kernel = std::string(k->id());
  GpuWorker& g = gpu_state(st, req.device);
  const InputSets host = load_sets(st, req.sets);
  const std::vector<DeviceSet>& sets =
      g.sets(req.sets, host, req.schedule.device_pool, &reply.load_inputs_ms);
  DeviceReferenceTarget target(g, req.definition, req.var_axes, sets, req.seeds);
  DeviceRunner runner(g, target);
  for (const TrialPlan& plan : req.schedule.trials) {
    const bool first = &plan == &req.schedule.trials.front();
    cu::TimingResult result;
    try {
      result = runner.measure_trial(req.schedule, plan, first, "events");
      Failure unused;
      target.settle(&unused);
    } catch (const std::exception& e) {
      if (dynamic_cast<const cu::StickyError*>(&e) != nullptr) st.exit_after_reply = true;
      try {
        g.writer().finish();  // the earlier trials' files are not read: their errors are moot
      } catch (const std::exception&) {
      }
      reply.ok = false;
      reply.error = e.what();
      return reply;
    }
    std::optional<protocol::CheckedCall> checked;
    if (!plan.check_output.empty()) {
      // Copied and written while the next trial runs; complete before the reply. The target
      // keeps the staged buffers alive until the next trial replaces them, and later work on
      // them is queued after the copy on the same stream.
      std::vector<std::pair<std::string, Tensor>> extra;
      const auto check_set = static_cast<std::size_t>(order_of(plan, first).check_set);
      if (op_family(req.definition).reference_extras != nullptr) {
        // The extras come from the set on the host: its fills made there, and a pool set (a
        // solution's checked call may be drawn on any) made from its source as the device does.
        InputSet made = host->at(
            check_set < host->size() ? check_set : (check_set - host->size()) % host->size());
        make_fills_on_host(made);
        if (check_set >= host->size()) {
          made.tensors = pool_tensors_on_host(made.tensors, req.schedule.device_pool.seed,
                                              static_cast<int>(check_set), shared_fills(*host));
        }
        append_set_reference_extras(req.definition, made, req.eval_extra, &extra);
      }
      g.writer().submit(plan.check_output, target.staged(), std::move(extra), g.stream());
      checked = protocol::CheckedCall{runner.staged_call(), {}, runner.staged_position()};
    }
    reply.trials.push_back(trial_result(result, std::move(checked)));
  }
  g.writer().finish();
  return reply;
}

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
