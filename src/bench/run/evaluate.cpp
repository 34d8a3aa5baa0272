#include "evaluate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "fib/bench/eval/compare.h"
#include "fib/bench/eval/op_family.h"
#include "fib/bench/launch/box.h"
#include "fib/bench/protocol/poison.h"
#include "fib/bench/protocol/trial_timing.h"
#include "fib/bench/run/test_hooks.h"
#include "judge.h"
#include "output_arena.h"
#include "timer.h"
#include "worker_messages.h"

namespace fib::bench::detail {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Outcome failed(EvaluationStatus status, std::string log) {
  Outcome o;
  o.status = status;
  o.log = std::move(log);
  return o;
}

// The environment.extra entries of the evaluation: how it was timed, against what, and the
// build it ran.
Json evaluation_environment(const EvaluationJob& job, const RunOptions& o, bool gpu) {
  Json env{{"timer", timer_description(gpu, o.gpu_timer)},
           {"reference", job.reference.label()},
           {"reference_threads", o.threads},
           {"build", Json{{"key", job.build.key},
                          {"toolchain", job.build.toolchain},
                          {"flags", job.build.flags},
                          {"sandbox", job.build.sandboxed ? "bubblewrap" : "none"}}},
           {"distinct_input_sets", job.prepared.trials + job.prepared.pool},
           {"inputs_made", job.prepared.inputs_made}};
  if (!job.prepared.shared_weights.empty()) {
    env["inputs_shared_by_checked_sets"] = job.prepared.shared_weights;
  }
  if (!job.reference.runtime.is_null()) env["reference_runtime"] = job.reference.runtime;
  if (!job.reference.cache.empty()) env["reference_cache"] = job.reference.cache;
  return env;
}

// Workers of a lane's other solutions kept stopped for their next evaluation: on the CPU enough
// for every solution of a definition in most datasets (a parked C++ worker holds little memory;
// a Python one its interpreter and torch). On a GPU each holds a CUDA context and whatever its
// allocator cached, so fewer.
std::size_t parked_workers(const Lane& lane) { return lane.device.is_cuda() ? 4 : 64; }

// The worker of `solution_key` (a solution and its build): each solution has its own, persistent
// across its evaluations; --isolated starts a fresh one every time.
void switch_to_solution(Lane& lane, const std::string& solution_key) {
#ifdef FIB_TEST_HOOKS
  if (test_hooks::solution_workers_shared()) return;
#endif
  lane.switch_solution(solution_key, parked_workers(lane));
}

// The lane's solution worker for `solution_key`; a fresh one with --isolated. Starting one (the
// solution's first evaluation, after a crash, or every one with --isolated) is counted apart
// from the evaluation's overhead.
Worker* start_solution_worker(Lane& lane, const EvaluateSettings& settings,
                              const std::string& solution_key, EvaluationCosts& costs,
                              std::string* error) {
  const bool isolated = settings.options.isolated;
  try {
    switch_to_solution(lane, solution_key);
    const bool starting =
        !lane.solution || !lane.solution->alive() || !lane.solution->channel_idle() || isolated;
    if (isolated) lane.solution.reset();
    const auto start0 = Clock::now();
    Worker* worker = &lane.solution_worker(settings.worker);
    if (starting) {
      costs.worker_started = true;
      costs.worker_start_ms = ms_since(start0);
    }
    return worker;
  } catch (const Error& e) {
    *error = e.what();
    return nullptr;
  }
}

std::string output_log_of(const CapturedOutput& out) {
  if (out.total_bytes == 0) return {};
  return fmt::format(
      "\n--- solution output ({} bytes{}) ---\n{}", out.total_bytes,
      out.total_bytes > out.head.size() + out.tail.size() ? ", head and tail kept" : "",
      out.text());
}

// A worker that timed out or died: the evaluation's outcome.
std::optional<Outcome> worker_failure(const Worker::Reply& r, const CapturedOutput& out,
                                      const std::string& output_log, double timeout_seconds) {
  if (r.kind == Worker::ReplyKind::kTimeout) {
    return failed(EvaluationStatus::kTimeout,
                  fmt::format("no result within the {} s timeout; the worker was killed{}",
                              timeout_seconds, output_log));
  }
  if (r.kind != Worker::ReplyKind::kDied) return std::nullopt;
  std::string how = r.died_how;
  // The worker's fault handler names what the solution wrote to: an input (inputs are
  // read-only) or the inaccessible pages around an output.
  const std::string said = out.text();
  if (auto at = said.rfind("fib: the solution "); at != std::string::npos) {
    const auto end = said.find('\n', at);
    const std::string line = said.substr(at + 5, end == std::string::npos ? end : end - at - 5);
    return failed(
        EvaluationStatus::kRuntimeError,
        fmt::format("{}: the worker was stopped by the fault ({}){}", line, how, output_log));
  }
  if (r.signal == 9)
    how +=
        "; a SIGKILL fib did not send usually means the kernel killed it for being out of memory";
  return failed(EvaluationStatus::kRuntimeError,
                fmt::format("the worker running the solution {}{}", how, output_log));
}

// A solution of the Python runtime is opened before its evaluation, under a deadline of its own:
// starting the interpreter and importing torch take seconds on a busy machine, which the
// evaluation's timeout (the solution's calls) is not meant to cover. The solution's module runs
// its top-level code here, so a hang in it still ends in a timeout. nullopt once it is open.
std::optional<Outcome> open_python_solution(Worker& worker, const protocol::SolutionRef& ref,
                                            double timeout_seconds) {
  if (ref.binding != "python" && ref.binding != "torch") return std::nullopt;
  const double seconds = timeout_seconds + 120;
  const Worker::Reply r = worker.call(protocol::load_request(ref),
                                      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                         std::chrono::duration<double>(seconds)));
  // The output of a module that loaded stays for the evaluation's log. What loading the module
  // cost is not idle time: the CPU time is marked anew.
  if (r.kind == Worker::ReplyKind::kOk && r.body.value("ok", false)) {
    worker.mark_cpu(/*discover=*/false);
    return std::nullopt;
  }
  const CapturedOutput out = worker.take_output();
  const std::string output_log = output_log_of(out);
  if (auto f = worker_failure(r, out, output_log, seconds)) return f;
  return failed(
      EvaluationStatus::kCompileError,
      r.body.value("error", std::string("the worker could not open the solution")) + output_log);
}

// A reply that says the solution could not run: not loaded, the worker failed, or an entry point
// that does not match the definition.
std::optional<Outcome> reply_failure(const protocol::EvaluateReply& reply, const Definition& def,
                                     const Solution& s, const std::string& output_log) {
  if (!reply.load_error.empty()) {
    return failed(EvaluationStatus::kCompileError, reply.load_error + output_log);
  }
  if (!reply.ok) {
    return failed(EvaluationStatus::kRuntimeError,
                  "the worker failed: " + reply.error + output_log);
  }
  if (std::string m = signature_mismatch(def, s, reply.signature); !m.empty()) {
    return failed(EvaluationStatus::kCompileError, std::move(m));
  }
  return std::nullopt;
}

// The checked call of one trial: its position among the trial's timed calls and, where the
// orchestrator drew it (CPU lanes), its outputs as read from the arena while the worker's tree
// was stopped; else they are in the file the trial's plan named.
struct DrawnCall {
  int trial = 0;
  int position = 0;
  std::shared_ptr<const Outputs> outputs;
  Json poison;  // integer poison sentinels of its outputs, by output
};

// The checked calls a GPU worker drew and reports (its reply gives positions only).
std::vector<DrawnCall> drawn_by_the_worker(const protocol::EvaluateRequest& request,
                                           const protocol::EvaluateReply& reply) {
  std::vector<DrawnCall> drawn;
  for (std::size_t t = 0; t < reply.trials.size(); ++t) {
    if (!reply.trials[t].checked) continue;
    const protocol::TrialPlan& plan = request.schedule.trials.at(t);
    const int position =
        plan.check_position >= 0 ? plan.check_position : reply.trials[t].checked->position;
    drawn.push_back({static_cast<int>(t), position, nullptr, reply.trials[t].checked->poison});
  }
  return drawn;
}

// The definition's outputs of one timed call as the arena holds them, with the misshapen ones
// the worker described instead (zero-filled tensors of the dtype and shape it returned).
Outputs outputs_of_slot(const Definition& def, const std::vector<Shape>& shapes,
                        const OutputArenaFile& arena, const protocol::TrialPlan& plan,
                        const protocol::TrialResult& trial, int position) {
  Outputs values;
  const auto slot = static_cast<std::uint64_t>(plan.first_slot + position);
  for (auto& [name, t] : arena.read_slot(def, shapes, slot)) values.emplace(name, std::move(t));
  for (const protocol::MisshapenOutput& m : trial.misshapen) {
    if (m.position != position) continue;
    values.insert_or_assign(m.output, Tensor(*parse_dtype(m.dtype), Shape(m.shape)));
  }
  return values;
}

// Each trial's checked call, drawn here, from the orchestrator's randomness, among the timed
// calls the trial made, once nothing in the worker's tree runs; its outputs read from the arena
// into the orchestrator's memory.
std::vector<DrawnCall> draw_from_the_arena(const Definition& def, const std::vector<Shape>& shapes,
                                           const OutputArenaFile& arena,
                                           const protocol::EvaluateRequest& request,
                                           const protocol::EvaluateReply& reply) {
  std::vector<DrawnCall> drawn;
  for (std::size_t t = 0; t < reply.trials.size(); ++t) {
    const protocol::TrialResult& trial = reply.trials[t];
    const protocol::TrialPlan& plan = request.schedule.trials.at(t);
    const int position = static_cast<int>(draw_checked_position(trial.samples_ms.size()));
    DrawnCall d{static_cast<int>(t), position, nullptr, Json::object()};
    d.outputs =
        std::make_shared<const Outputs>(outputs_of_slot(def, shapes, arena, plan, trial, position));
    for (const auto& [name, v] : poison_sentinels(def, plan.poison_base + position)) {
      d.poison[name] = v;
    }
    drawn.push_back(std::move(d));
  }
  return drawn;
}

// The shape of every output of `def` on a workload's axes (as the worker sizes them).
std::vector<Shape> output_shapes(const Definition& def, const AxisValues& axes) {
  const auto bound = def.bind_axes(axes);
  if (!bound) throw Error("request", "the workload does not bind every var axis");
  std::vector<Shape> shapes;
  for (const auto& spec : def.outputs) {
    const auto shape = def.concrete_shape(spec, *bound);
    if (!shape) throw Error("request", fmt::format("cannot size output '{}'", spec.name));
    shapes.emplace_back(shape->begin(), shape->end());
  }
  return shapes;
}

// A fresh base for the poison indices of an evaluation's timed calls (any value will do: the
// orchestrator chose it, so it knows every call's sentinels).
std::uint64_t draw_poison_seed() { return draw_checked_position(std::uint64_t{1} << 40); }

// What the trace records of the checked calls the orchestrator drew.
Json arena_record(const OutputArenaFile& arena, const std::vector<DrawnCall>& drawn, double stop_ms,
                  double read_ms) {
  Json positions = Json::array();
  for (const DrawnCall& d : drawn) positions.push_back(d.position);
  return Json{{"drawn_by", "orchestrator"},
              {"positions", positions},
              {"arena_bytes", arena.bytes()},
              {"stop_ms", stop_ms},
              {"read_ms", read_ms}};
}

// The input set of each checked call, in order.
std::vector<int> checked_sets(const protocol::EvaluateRequest& request,
                              const std::vector<DrawnCall>& drawn) {
  std::vector<int> sets;
  for (const DrawnCall& d : drawn) {
    const protocol::TrialPlan& plan = request.schedule.trials.at(static_cast<std::size_t>(d.trial));
    sets.push_back(plan.timed.at(static_cast<std::size_t>(d.position)));
  }
  return sets;
}

// The checked calls: their input sets from the request's own plan, their outputs drawn from the
// arena (or in the files the request named), the reference's in `reference_files` (one per
// checked call, in order).
std::vector<CheckedCall> checked_calls(const protocol::EvaluateRequest& request,
                                       const std::vector<DrawnCall>& drawn,
                                       const PreparedWorkload& p,
                                       const std::vector<std::string>& reference_files, bool gpu) {
  std::vector<CheckedCall> calls;
  const std::vector<int> sets = checked_sets(request, drawn);
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    const DrawnCall& d = drawn[i];
    CheckedCall cc;
    cc.trial = d.trial;
    cc.set = sets.at(i);
    cc.seed = p.set_seeds.at(static_cast<std::size_t>(cc.set));
    cc.solution_outputs =
        request.schedule.trials.at(static_cast<std::size_t>(d.trial)).check_output;
    cc.solution_values = d.outputs;
    cc.reference_outputs = reference_files.at(i);
    cc.inputs = p.inputs_file;
    // GPU lanes: sets past the checked ones are made on the device, and remade on the host.
    if (gpu) cc.pool = p.schedule.device_pool;
    cc.poison = d.poison;
    calls.push_back(std::move(cc));
  }
  return calls;
}

// The verdict still to make on a solution that ran to the end: from here on nothing needs the
// lane's workers or the workload's preparation (the checked-output files stay until it is
// made).
struct PendingJudgement {
  const Definition* def = nullptr;
  const Workload* workload = nullptr;
  const Solution* solution = nullptr;
  const Lane* lane = nullptr;
  const RunOptions* options = nullptr;
  const EvalConfigFile* builtin = nullptr;
  const EvalConfigFile* user = nullptr;
  std::function<void(const std::string&)> warn;
  std::vector<CheckedCall> calls;
  std::optional<SamplingDraws> sampling;
  Json environment;
  std::string output_log;
  Timing timing, reference;
  std::string reference_label;
  Json gpu_timing = Json::array();  // per trial
  Json worker_phases_ms;
};

// The performance block of a PASSED trace; `roofline_line` gets its share of the roofline where
// the op family declares its demand and the device's peaks are known (GPU lanes: fib knows no
// CPU peaks).
Performance passed_performance(const PendingJudgement& j, double judge_ms,
                               std::string* roofline_line) {
  roofline_line->clear();
  const bool gpu = j.lane->device.is_cuda();
  Performance perf;
  perf.latency_ms = j.timing.latency_ms;
  perf.reference_latency_ms = j.reference.latency_ms;
  perf.speedup_factor = j.timing.latency_ms > 0 ? j.reference.latency_ms / j.timing.latency_ms : 0;
  perf.extra = Json{{"method", timing_method_name(gpu, j.options->gpu_timer)},
                    {"solution", j.timing.detail},
                    {"reference", j.reference.detail},
                    {"judge_ms", judge_ms}};
  if (!gpu) return perf;
#ifdef FIB_HAVE_CUDA
  // Achieved rates against the device's peaks; faster than the hardware allows is flagged.
  const cuda::RooflineInput rin = roofline_input_for(*j.def, *j.workload, j.timing.latency_ms);
  if (rin.bytes || rin.flops) {
    const cuda::Roofline rl = cuda::roofline(rin, j.lane->peaks);
    perf.extra["roofline"] = cuda::to_json(rl);
    *roofline_line = cuda::roofline_line(rl, j.timing.latency_ms);
    if (!rl.plausible && j.warn) {
      j.warn(fmt::format("warning: {} on {} workload {}: {}", j.solution->name, j.def->name,
                         short_uuid(j.workload->uuid), rl.note));
    }
  }
#endif
  perf.extra["worker_phases_ms"] = j.worker_phases_ms;
  perf.extra["gpu_timing"] = j.gpu_timing;
  return perf;
}

Outcome judge_outcome(const PendingJudgement& j) {
  const auto judge0 = Clock::now();
  const Judgement verdict = judge(*j.def, *j.builtin, j.user, j.options->cli, j.calls, j.sampling);
  const double judge_ms = ms_since(judge0);
  Outcome o;
  o.status = verdict.status;
  o.log = verdict.log;
  if (verdict.status == EvaluationStatus::kPassed) {
    std::vector<std::string> seeds;
    for (const auto& c : j.calls) seeds.push_back(std::to_string(c.seed));
    o.log = fmt::format("passed {} checked calls (input seeds {}) against {}{}", j.calls.size(),
                        fmt::join(seeds, ", "), j.reference_label,
                        j.sampling ? "; sampling distribution check passed" : "");
  }
  o.log += j.output_log;
  o.environment = j.environment;
  o.correctness = verdict.correctness;
  if (verdict.status == EvaluationStatus::kPassed) {
    std::string roofline;
    o.performance = passed_performance(j, judge_ms, &roofline);
    if (!roofline.empty()) o.log += "\n" + roofline;
  }
  return o;
}

// The solution's run, up to the judgement: a failure, or the judgement to make.
struct Attempt {
  std::optional<Outcome> failure;
  std::optional<PendingJudgement> judgement;
};

Attempt failed_attempt(Outcome o, const Json& environment) {
  o.environment = environment;
  return Attempt{std::move(o), std::nullopt};
}

// The request as the orchestrator judges it: the checked outputs (and sampling draws) in the
// workload's folder. The worker is told of no checked call: it draws one after the calls.
protocol::EvaluateRequest evaluation_request(const Lane& lane, const EvaluationJob& job,
                                             const RunOptions& o,
                                             const std::optional<std::string>& sampling_file) {
  const PreparedWorkload& p = job.prepared;
  return make_evaluate_request(
      EvaluationCall{.def = job.def,
                     .workload = job.workload,
                     .solution = job.solution,
                     .build = job.build,
                     .inputs_file = p.inputs_file,
                     .schedule = with_drawn_checks(with_check_outputs(p.schedule, p.dir, job.name)),
                     .device = lane.device.to_string(),
                     .gpu_timer = std::string(option_name(o.gpu_timer)),
                     .sampling_output = sampling_file,
                     .sampling_draws = p.sampling_draws});
}

// The same request as the worker is handed it: its files staged in the box, its outputs written
// there. Throws fib::Error when a file cannot be staged.
protocol::EvaluateRequest request_in_box(Box& box, const protocol::EvaluateRequest& request,
                                         const EvaluationJob& job) {
  protocol::EvaluateRequest sent = request;
  const Box::Staged staged =
      box.stage(job.prepared.inputs_file,
                Box::Library{job.build.shared_object, job.build.key, job.build.python.has_value()});
  sent.sets = staged.inputs;
  sent.solution.library = staged.library;
  sent.schedule = box.outputs_in_box(request.schedule);
  if (sent.sampling) sent.sampling->output = box.output(request.sampling->output);
  return sent;
}

// The solution worker's answer to one evaluation request. A worker whose tree it stopped is
// resumed when the answer goes.
struct WorkerAnswer {
  Worker* worker = nullptr;
  Worker::Reply reply;
  double observed_ms = 0;  // the orchestrator's wall time around the request
  CpuObservation cpu;      // the worker tree's CPU time, read by fib
  CapturedOutput out;
  std::string output_log;
  bool stopped = false;  // the worker's process tree is stopped
  double stop_ms = 0;    // what stopping it took

  WorkerAnswer() = default;
  WorkerAnswer(const WorkerAnswer&) = delete;
  WorkerAnswer& operator=(const WorkerAnswer&) = delete;
  ~WorkerAnswer() {
    if (stopped && worker != nullptr) worker->resume_tree();
  }
};

// The worker tree's CPU time since its previous reply: what it did while idle.
void observe_idle_cpu(const Worker& w, CpuObservation* seen) {
  const std::optional<double> now = w.tree_cpu_ms();
  if (now && w.last_reply_cpu()) {
    seen->idle_cpu_ms = *now - w.last_reply_cpu()->cpu_ms;
    seen->idle_wall_ms = ms_since(w.last_reply_cpu()->at);
  }
}

// The tree's CPU time before the request (once the reply is taken, `seen->cpu_ms` is set from
// the difference); `set_bytes`, an input set's size.
void observe_cpu_before(const Worker& w, double set_bytes, CpuObservation* seen) {
  seen->cpus = w.allowed_cpus();
  seen->set_bytes = set_bytes;
  seen->cpu_ms = w.tree_cpu_ms();
}

// After the reply (and outside the span the clock check compares): the tree found anew, so that a
// process the solution started counts.
void observe_cpu_after(Worker& w, CpuObservation* seen) {
  if (w.alive()) w.mark_cpu(/*discover=*/true);
  const auto& mark = w.last_reply_cpu();
  seen->cpu_ms = seen->cpu_ms && mark && w.alive()
                     ? std::optional<double>(mark->cpu_ms - *seen->cpu_ms)
                     : std::nullopt;
}

double input_set_bytes(const PreparedWorkload& p) {
  std::error_code ec;
  const auto bytes = fs::file_size(p.inputs_file, ec);
  return ec ? 0.0 : static_cast<double>(bytes) / std::max(1, p.trials + p.pool);
}

// Stops the worker's tree once it has answered: from here on nothing the solution's process does
// reaches what fib reads. The outcome when it cannot be stopped (the worker is killed).
std::optional<Outcome> stop_after_reply(WorkerAnswer* a) {
  const auto stop0 = Clock::now();
  const std::string why = a->worker->stop_tree(std::chrono::milliseconds(5000));
  a->stop_ms = ms_since(stop0);
  if (why.empty()) {
    a->stopped = true;
    return std::nullopt;
  }
  a->worker->kill();
  return failed(EvaluationStatus::kRuntimeError,
                fmt::format("{}: its outputs cannot be read while it may still write them{}", why,
                            a->output_log));
}

// How the solution's outputs leave the box (sampling draws; with the pen switched off for a
// test, the checked calls' files): held to regular files with one link, in fresh copies.
// Copies are made only of a stopped worker's outputs: one still running could write on.
std::optional<Outcome> take_solution_outputs(Box& box, const WorkerAnswer& a) {
  const test_hooks::PenSwitches& pen = test_hooks::pen();
  // A test of worker-drawn files stands for the time fib once left before taking them.
  if (!a.stopped && pen.worker_draws_checked_calls && pen.read_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(pen.read_delay_ms));
  }
  const bool follow = pen.follow_links_out_of_the_box;
  const std::string unsound =
      box.take_outputs(/*private_copies=*/a.stopped && !follow, /*check=*/!follow);
  if (unsound.empty()) return std::nullopt;
  return failed(EvaluationStatus::kRuntimeError, unsound + a.output_log);
}

// Sends `sent` to the lane's solution worker (started, and a Python solution opened, first),
// stops its tree once it answered (`stop`), and takes the outputs out of the box. `arena_fd`
// (>= 0) goes with the request. The outcome when the worker could not start, open the
// solution, answer in time or be stopped.
std::optional<Outcome> call_solution_worker(Lane& lane, const EvaluateSettings& settings, Box& box,
                                            const EvaluationJob& job,
                                            const protocol::EvaluateRequest& sent, int arena_fd,
                                            bool stop, double set_bytes, EvaluationCosts& costs,
                                            WorkerAnswer* a) {
  const double timeout_seconds = settings.options.timeout_seconds;
  std::string start_error;
  const std::string key = job.solution.name + "@" + job.build.key;
  a->worker = start_solution_worker(lane, settings, key, costs, &start_error);
  if (a->worker != nullptr) observe_idle_cpu(*a->worker, &a->cpu);
  // A worker serves one solution; where it served another just before (a worker shared between
  // solutions, as only a red-team test makes one), its idle work was that solution's.
  if (a->worker != nullptr && a->worker->last_solution() != job.solution.name) {
    a->cpu.idle_cpu_ms.reset();
  }
  if (a->worker == nullptr) {
    return failed(EvaluationStatus::kRuntimeError,
                  "the solution worker could not start: " + start_error);
  }
  a->worker->set_last_solution(job.solution.name);
  if (auto f = open_python_solution(*a->worker, sent.solution, timeout_seconds)) return f;
  const Json request_json = to_json(sent);
  observe_cpu_before(*a->worker, set_bytes, &a->cpu);
  const auto sent_at = Clock::now();
  a->reply = a->worker->call(request_json,
                             Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(timeout_seconds)),
                             arena_fd);
  a->observed_ms = ms_since(sent_at);
  observe_cpu_after(*a->worker, &a->cpu);
  a->out = a->worker->take_output();
  a->output_log = output_log_of(a->out);
  if (auto f = worker_failure(a->reply, a->out, a->output_log, timeout_seconds)) return f;
  if (stop) {
    if (auto f = stop_after_reply(a)) return f;
  }
  return take_solution_outputs(box, *a);  // out of the worker's reach before anything reads them
}

// A reply whose calls ran, held to what makes its times rankable: no failed call, and the
// worker's clock agreeing with the orchestrator's. The outcome when not; a worker that cannot be
// trusted further is replaced.
std::optional<Outcome> failed_calls(const protocol::EvaluateRequest& request,
                                    const protocol::EvaluateReply& reply, const WorkerAnswer& a,
                                    Json& env) {
  if (reply.failure) {
    std::string replaced;
    if (reply.fatal) {
      // A sticky CUDA error: the worker exits after answering; the next evaluation gets a new one.
      a.worker->kill();
      replaced = "; the worker process was replaced";
    }
    return failed(EvaluationStatus::kRuntimeError,
                  fmt::format("call #{}: {}{}{}", reply.failure->call, reply.failure->message,
                              replaced, a.output_log));
  }
  // Only a run whose times would be ranked is held to the clock check: a failed call's worker
  // may spend long after its last timed call (a sticky CUDA error tears its context down).
  const ClockCheck clock = check_worker_clock(a.observed_ms, reply);
  env["timer_check"] = clock.record;
  if (!clock.mismatch.empty()) {
    a.worker->kill();  // its clock may stay rewritten: the next evaluation gets a new worker
    return failed(EvaluationStatus::kRuntimeError, clock.mismatch + a.output_log);
  }
  const CpuCheck cpu = check_worker_cpu(a.cpu, request, reply);
  env["cpu_check"] = cpu.record;
  if (!cpu.mismatch.empty() && !test_hooks::pen().cpu_check_off) {
    a.worker
        ->kill();  // what worked outside its calls may go on: the next evaluation gets a new one
    return failed(EvaluationStatus::kRuntimeError, cpu.mismatch + a.output_log);
  }
  return std::nullopt;
}

// The worker's reply, held against the request, with what it adds to the costs and the
// environment; the outcome when the solution failed.
std::optional<Outcome> read_evaluation(const Lane& lane, const EvaluationJob& job,
                                       const protocol::EvaluateRequest& request,
                                       const WorkerAnswer& a, EvaluationCosts& costs, Json& env,
                                       protocol::EvaluateReply* reply, Timing* timing) {
  try {
    *reply = read_reply(request, a.reply.body);
  } catch (const protocol::ProtocolError& e) {
    a.worker->kill();  // what it sent cannot be trusted: the next evaluation gets a new one
    return failed(
        EvaluationStatus::kRuntimeError,
        fmt::format("the worker's reply is not one fib can take: {}{}", e.what(), a.output_log));
  }
  if (auto f = reply_failure(*reply, job.def, job.solution, a.output_log)) return f;
  // What stands after each output: inaccessible pages on the host; on a device, unmapped
  // address space where its driver allows, else guard bytes only (gpu_memory.h).
  env["output_guard"] = lane.device.is_cpu()
                            ? Json("inaccessible pages")
                            : reply->gpu.value("output_guard", Json("guard bytes"));
  costs.input_load_ms = reply->load_inputs_ms;
  costs.worker_schedule_ms = reply->schedule_ms;
  costs.cache_flush_ms = reply->cache_flush_ms;
  *timing = timing_from_trials(reply->trials);
  costs.timed_ms = timing->timed_ms;
  costs.warmup_ms = timing->warmup_ms;
  if (!reply->window_audit.is_null()) env["window_audit"] = reply->window_audit;
  return failed_calls(request, *reply, a, env);
}

// The judgement of a solution that ran to the end, against the reference's outputs on the sets
// its checked calls drew.
PendingJudgement pending_judgement(const Lane& lane, const EvaluationJob& job,
                                   const EvaluateSettings& settings,
                                   const protocol::EvaluateRequest& request,
                                   const protocol::EvaluateReply& reply,
                                   const std::vector<DrawnCall>& drawn,
                                   const std::vector<std::string>& reference_files) {
  const PreparedWorkload& p = job.prepared;
  PendingJudgement j;
  j.def = &job.def;
  j.workload = &job.workload;
  j.solution = &job.solution;
  j.lane = &lane;
  j.options = &settings.options;
  j.builtin = &settings.builtin;
  j.user = settings.user;
  j.warn = settings.warn;
  j.calls = checked_calls(request, drawn, p, reference_files, lane.device.is_cuda());
  if (request.sampling) {
    // The draws are on set 0, the first trial's checked set in the reference's run.
    j.sampling =
        SamplingDraws{request.sampling->output, p.reference_outputs.at(0), p.set_seeds.at(0)};
  }
  j.reference = job.reference.timing;
  j.reference_label = job.reference.label();
  for (const protocol::TrialResult& t : reply.trials) j.gpu_timing.push_back(t.gpu);
  j.worker_phases_ms = reply.worker_phases_ms.is_null() ? Json::object() : reply.worker_phases_ms;
  return j;
}

Attempt run_solution(Lane& lane, const EvaluationJob& job, const EvaluateSettings& settings,
                     EvaluationCosts& costs) {
  const PreparedWorkload& p = job.prepared;
  Json env = evaluation_environment(job, settings.options, lane.device.is_cuda());
  std::optional<std::string> sampling_file;
  if (p.sampling) sampling_file = (p.dir / (job.name + "-draws.safetensors")).string();
  protocol::EvaluateRequest request =
      evaluation_request(lane, job, settings.options, sampling_file);
  const test_hooks::PenSwitches& pen = test_hooks::pen();
  // CPU lanes: every timed call's outputs in an arena fib holds; the orchestrator draws.
  std::optional<OutputArenaFile> arena;
  std::vector<Shape> shapes;
  Box box(settings.worker.sandbox.box, settings.worker.sandbox.box_inside);
  protocol::EvaluateRequest sent;
  try {
    if (lane.device.is_cpu() && !pen.worker_draws_checked_calls) {
      shapes = output_shapes(job.def, job.workload.axes);
      PlannedArena planned =
          plan_output_arena(job.def, shapes, std::move(request.schedule), draw_poison_seed());
      request.schedule = std::move(planned.schedule);
      request.arena = planned.layout;
      arena.emplace(planned.layout);
    }
    sent = request_in_box(box, request, job);
  } catch (const Error& e) {
    return failed_attempt(
        failed(EvaluationStatus::kRuntimeError, std::string("sandbox: ") + e.what()), env);
  }
  WorkerAnswer answer;
  const bool stop = arena.has_value() && !pen.read_without_stopping;
  if (auto f = call_solution_worker(lane, settings, box, job, sent, arena ? arena->fd() : -1, stop,
                                    input_set_bytes(p), costs, &answer)) {
    return failed_attempt(std::move(*f), env);
  }
  protocol::EvaluateReply reply;
  Timing timing;
  if (auto f = read_evaluation(lane, job, request, answer, costs, env, &reply, &timing)) {
    return failed_attempt(std::move(*f), env);
  }
  std::vector<DrawnCall> drawn;
  if (arena) {
    if (!stop && pen.read_delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(pen.read_delay_ms));
    }
    const auto read0 = Clock::now();
    try {
      drawn = draw_from_the_arena(job.def, shapes, *arena, request, reply);
    } catch (const Error& e) {
      return failed_attempt(failed(EvaluationStatus::kRuntimeError,
                                   std::string("reading the checked outputs: ") + e.what()),
                            env);
    }
    env["checked_calls"] = arena_record(*arena, drawn, answer.stop_ms, ms_since(read0));
  } else {
    drawn = drawn_by_the_worker(request, reply);
  }
  std::string reference_error;
  const auto reference0 = Clock::now();
  const auto reference_files = lane.reference->outputs_on_sets(
      job.def, job.workload, p, checked_sets(request, drawn), &reference_error);
  // The reference's outputs on the drawn sets it had not made yet: part of the harness's time.
  env["checked_reference_ms"] = ms_since(reference0);
  if (!reference_files) {
    return failed_attempt(
        failed(EvaluationStatus::kRuntimeError,
               "the reference failed on the input set of a checked call: " + reference_error),
        env);
  }
  PendingJudgement j =
      pending_judgement(lane, job, settings, request, reply, drawn, *reference_files);
  j.environment = std::move(env);
  j.output_log = answer.output_log;
  j.timing = timing;
  return Attempt{std::nullopt, std::move(j)};
}

// Closes the lane's part of an evaluation: its overhead (when the solution's calls ran) and,
// with --isolated, its worker. Returns what a passed trace's performance.extra records of it.
Json close_evaluation(Lane& lane, const RunOptions& o, Clock::time_point t0, Evaluated& e) {
  const EvaluationCosts& c = e.costs;
  const double calls_ms = c.timed_ms + c.warmup_ms;
  Json extra = Json::object();
  if (calls_ms > 0) {
    e.overhead_ms =
        ms_since(t0) - calls_ms - c.input_load_ms - c.worker_start_ms - c.cache_flush_ms;
    extra = Json{
        {"harness_overhead_ms", e.overhead_ms},
        {"input_load_ms", c.input_load_ms},
        {"worker_start_ms", c.worker_start_ms},
        // Of the overhead, what the worker spent around the calls (preparing,
        // checking, writing the checked outputs); the rest is messaging and, unless
        // it ran beside the next evaluation, the orchestrator's judgement.
        {"worker_overhead_ms", std::max(0.0, c.worker_schedule_ms - calls_ms - c.cache_flush_ms)},
        {"cache_flush_ms", c.cache_flush_ms}};
  }
  if (o.isolated) lane.solution.reset();
  return extra;
}

Outcome with_overhead(Outcome o, const Json& extra) {
  if (o.performance) {
    for (const auto& [k, v] : extra.items()) o.performance->extra[k] = v;
  }
  return o;
}

}  // namespace

Evaluated evaluate(Lane& lane, const EvaluationJob& job, const EvaluateSettings& settings,
                   bool judge_later) {
  const auto t0 = Clock::now();
  Evaluated e;
  Attempt attempt = run_solution(lane, job, settings, e.costs);
  if (attempt.failure || !judge_later) {
    Outcome o = attempt.failure ? std::move(*attempt.failure) : judge_outcome(*attempt.judgement);
    const Json extra = close_evaluation(lane, settings.options, t0, e);
    e.outcome = with_overhead(std::move(o), extra);
    return e;
  }
  const Json extra = close_evaluation(lane, settings.options, t0, e);
  e.judge = [j = std::move(*attempt.judgement), extra] {
    return with_overhead(judge_outcome(j), extra);
  };
  return e;
}

std::string signature_mismatch(const Definition& def, const Solution& s, const std::string& sig) {
  if (sig.empty()) return {};
  const auto gt = sig.find('>');
  if (gt == std::string::npos) return {};
  const std::size_t params = gt;
  const std::size_t returns = sig.size() - gt - 1;
  const bool dps = s.spec.dps();
  const std::size_t want_params = def.inputs.size() + (dps ? def.outputs.size() : 0);
  const std::size_t want_returns = dps ? 0 : def.outputs.size();
  if (params == want_params && returns == want_returns) return {};
  std::vector<std::string> names;
  for (const auto& i : def.inputs) names.push_back(i.name);
  if (dps) {
    for (const auto& out : def.outputs) names.push_back(out.name);
  }
  return fmt::format(
      "the entry point takes {} parameters and returns {} tensors, but a {} solution of {} is "
      "called with {} ({}) and returns {}",
      params, returns, dps ? "destination-passing" : "value-returning", def.name, want_params,
      fmt::join(names, ", "), want_returns);
}

}  // namespace fib::bench::detail
