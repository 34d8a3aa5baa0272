#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "bench/run/judge.h"
#include "bench/run/summary.h"
#include "bench/worker/input_sets.h"
#include "fib/bench/build.h"
#include "fib/bench/run.h"
#include "fib/bench/timing.h"
#include "fib/bench/worker.h"
#include "fib/dataset/trace_set.h"
#include "fib/reference/reference.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/random.h"
#include "fib/tensor/safetensors.h"
#include "fib/trace/suggest.h"
#include "fib/version.h"

namespace fib::bench {

namespace {
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// ---- Environment ----------------------------------------------------------------------------
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(' '));
        return v;
      }
    }
  }
  return "unknown CPU";
}

std::uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0
             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(size)
             : 0;
}

Json host_json() {
  struct utsname u {};
  ::uname(&u);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return Json{{"host", host},
              {"os", fmt::format("{} {} {}", u.sysname, u.release, u.machine)},
              {"logical_cpus", ::sysconf(_SC_NPROCESSORS_ONLN)},
              {"memory_gib", static_cast<double>(physical_memory()) / (1u << 30)}};
}

std::string iso_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us % 1000000);
}

// ---- Scratch space -----------------------------------------------------------------------------
// Input sets and checked outputs travel as files in a private folder, on tmpfs when there is
// one; it is removed when the run ends.
class Scratch {
 public:
  Scratch() {
    std::error_code ec;
    fs::path base = fs::exists("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0
                        ? fs::path("/dev/shm")
                        : fs::temp_directory_path();
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      fs::path p = base / fmt::format("fib-run-{}-{:08x}", ::getpid(), rd());
      if (fs::create_directory(p, ec)) {
        fs::permissions(p, fs::perms::owner_all, ec);
        root_ = p;
        return;
      }
    }
    throw Error(base.string(), "cannot create a scratch folder for the run");
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

// ---- Workload preparation
// ------------------------------------------------------------------------
struct PreparedWorkload {
  fs::path dir;
  std::string inputs_file;  // every input set (bench/worker/input_sets.h)
  std::vector<std::uint64_t> set_seeds;
  int trials = 0;
  int pool = 0;
  Json schedule;                               // shared by the reference and every solution
  std::vector<std::string> reference_outputs;  // per trial
  std::vector<std::string> notes;              // input materialization notes
  bool sampling = false;
  ResolvedEval eval;  // the definition-wide settings (trial counts, policy extras)
};

std::uint64_t tensor_bytes(const MaterializedInputs& in) {
  std::uint64_t n = 0;
  for (const auto& [k, t] : in.tensors) n += t.nbytes();
  return n;
}

std::string short_uuid(const std::string& uuid) { return uuid.substr(0, 8); }

// ---- Statistics for traces
// -----------------------------------------------------------------------
struct Timing {
  double latency_ms = 0;  // mean of per-trial medians (upstream's definition)
  Json detail;            // stats over all samples, per-trial medians, raw samples, stop reasons
  double timed_ms = 0;    // sum of all samples
  double warmup_ms = 0;   // time inside the (untimed) warmup calls
  bool ok = false;
};

Timing timing_from_trials(const Json& trials) {
  Timing t;
  std::vector<double> all, medians;
  Json raw = Json::array(), stops = Json::array();
  for (const Json& tr : trials) {
    const auto s = tr.at("samples_ms").get<std::vector<double>>();
    if (s.empty()) continue;
    medians.push_back(summarize(s).median);
    t.warmup_ms += tr.value("warmup_ms", 0.0);
    all.insert(all.end(), s.begin(), s.end());
    raw.push_back(s);
    stops.push_back(tr.value("stopped_by", std::string()));
  }
  if (medians.empty()) return t;
  t.ok = true;
  for (double m : medians) t.latency_ms += m;
  t.latency_ms /= static_cast<double>(medians.size());
  for (double x : all) t.timed_ms += x;
  t.detail = stats_to_json(summarize(all));
  t.detail["trial_medians_ms"] = medians;
  t.detail["stopped_by"] = stops;
  t.detail["samples_ms"] = raw;
  return t;
}

// ---- The run
// ---------------------------------------------------------------------------------------
class Run {
 public:
  Run(const RunOptions& o, const RunCallbacks& cb) : o_(o), cb_(cb) {}

  RunResult go();

 private:
  void message(const std::string& m) {
    result_.messages.push_back(m);
    if (cb_.on_message) cb_.on_message(m);
  }
  Worker& solution_worker();
  Worker& reference_worker();
  WorkerSpec worker_spec(const std::string& role) const;
  std::optional<PreparedWorkload> prepare(const Definition& def, const Trace& workload,
                                          const fs::path& dir);
  bool run_reference(const Definition& def, const Workload& w, PreparedWorkload& p, Timing* timing,
                     std::string* kernel);
  Trace evaluate(const Definition& def, const Workload& w, const Solution& s,
                 const BuildResult& build, PreparedWorkload& p, const Timing& ref,
                 const std::string& ref_kernel, double* overhead_ms);
  Trace make_trace(const Definition& def, const Workload& w, const Solution& s,
                   EvaluationStatus status, std::string log, Json env_extra);
  void record(TraceSet& set, Trace t, const Definition& def, const Solution& s);

  const RunOptions& o_;
  const RunCallbacks& cb_;
  RunResult result_;
  std::unique_ptr<Scratch> scratch_;
  std::unique_ptr<Worker> solution_worker_, reference_worker_;
  EvalConfigFile builtin_;
  std::optional<EvalConfigFile> user_;
  std::uint64_t seed_ = 0;
  std::string hardware_;
  Json host_;
  std::size_t done_ = 0, total_ = 0;
};

WorkerSpec Run::worker_spec(const std::string& role) const {
  WorkerSpec s;
  s.executable = o_.worker_executable;
  s.role = role;
  s.memory_limit_bytes = o_.memory_limit_bytes > 0 ? o_.memory_limit_bytes : physical_memory() / 2;
  s.home = scratch_->root();
  s.threads = o_.threads;
  return s;
}

Worker& Run::solution_worker() {
  if (!solution_worker_ || !solution_worker_->alive()) {
    solution_worker_ = std::make_unique<Worker>(worker_spec("solution"));
  }
  return *solution_worker_;
}

Worker& Run::reference_worker() {
  if (!reference_worker_ || !reference_worker_->alive()) {
    reference_worker_ = std::make_unique<Worker>(worker_spec("reference"));
  }
  return *reference_worker_;
}

std::optional<PreparedWorkload> Run::prepare(const Definition& def, const Trace& wt,
                                             const fs::path& dir) {
  const Workload& w = wt.workload;
  PreparedWorkload p;
  p.eval = resolve_eval(builtin_, user_ ? &*user_ : nullptr, o_.cli, def, "");
  const ResolvedEval& cfg = p.eval;
  p.dir = dir;
  p.trials = std::max(1, cfg.num_trials);
  p.sampling = def.op_type == "sampling";
  fs::create_directories(dir);
  const int warmup = std::max(0, cfg.warmup_runs);
  const int iterations = std::max(1, cfg.iterations);
  const std::uint64_t base = Rng::derive(seed_, def.name + "/" + w.uuid);

  std::vector<MaterializedInputs> sets;
  auto make_set = [&](int k) {
    MaterializeOptions mo;
    mo.seed = Rng::derive(base, fmt::format("set{}", k));
    mo.dataset_root = o_.dataset;
    sets.push_back(materialize_inputs(def, w, mo));
    if (k == 0) p.notes = sets.back().notes;
    p.set_seeds.push_back(mo.seed);
  };
  for (int t = 0; t < p.trials; ++t) make_set(t);
  const std::uint64_t set_bytes = tensor_bytes(sets.front());
  // Distinct input sets for the unchecked calls too, up to the memory budget, so an output
  // cache keyed on the inputs never hits (and a solution cannot tell checked calls apart).
  const std::uint64_t calls =
      static_cast<std::uint64_t>(p.trials) * static_cast<std::uint64_t>(warmup + iterations - 1);
  const std::uint64_t budget_sets =
      set_bytes > 0 ? std::max<std::uint64_t>(1, o_.input_pool_bytes / set_bytes) : calls;
  p.pool = static_cast<int>(std::clamp<std::uint64_t>(std::min(calls, budget_sets), 1, 1024));
  for (int k = 0; k < p.pool; ++k) make_set(p.trials + k);
  p.inputs_file = (dir / "inputs.safetensors").string();
  detail::write_input_sets(p.inputs_file, def, sets, Rng::derive(base, "layout"));

  // The schedule: per trial, warmup calls then timed calls over the pool, with the checked set
  // at a position drawn here (the worker learns it only with the request; the solution never).
  std::mt19937_64 rng(Rng::derive(base, "schedule"));
  const int min_samples = std::min(iterations, 10);
  Json trials = Json::array();
  int next = 0;
  auto pool_index = [&] { return p.trials + (next++ % p.pool); };
  for (int t = 0; t < p.trials; ++t) {
    std::vector<int> wu, timed;
    for (int i = 0; i < warmup; ++i) wu.push_back(pool_index());
    const int check = static_cast<int>(rng() % static_cast<std::uint64_t>(min_samples));
    for (int i = 0; i < iterations; ++i) timed.push_back(i == check ? t : pool_index());
    trials.push_back(Json{{"warmup", wu},
                          {"timed", timed},
                          {"check_position", check},
                          {"max_seconds", o_.max_trial_seconds}});
  }
  p.schedule = Json{{"trials", trials},
                    {"min_samples", min_samples},
                    {"rel_precision", 0.005},
                    {"fixed_iterations", o_.fixed_iterations},
                    {"flush_caches", true}};
  return p;
}

Json with_check_outputs(Json schedule, const fs::path& dir, const std::string& who) {
  for (std::size_t t = 0; t < schedule["trials"].size(); ++t) {
    schedule["trials"][t]["check_output"] =
        (dir / fmt::format("{}-trial{}.safetensors", who, t)).string();
  }
  return schedule;
}

bool Run::run_reference(const Definition& def, const Workload& w, PreparedWorkload& p,
                        Timing* timing, std::string* kernel) {
  AxisValues var;
  Json axes = Json::object();
  for (const auto& [k, v] : w.axes) axes[k] = v;
  const Json schedule = with_check_outputs(p.schedule, p.dir, "reference");
  const Json req{{"cmd", "reference"},         {"definition", to_json(def)},
                 {"var_axes", axes},           {"sets", p.inputs_file},
                 {"seeds", p.set_seeds},       {"threads", o_.threads},
                 {"eval_extra", p.eval.extra}, {"schedule", schedule}};
  std::string why;
  Worker::Reply r;
  try {
    r = reference_worker().call(
        req, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(std::max(60.0, o_.timeout_seconds))));
  } catch (const Error& e) {
    why = e.what();
  }
  if (why.empty() && r.kind != Worker::ReplyKind::kOk) {
    why = r.kind == Worker::ReplyKind::kTimeout ? "the reference timed out"
                                                : "the reference worker " + r.died_how;
  }
  if (why.empty() && !r.body.value("ok", false)) why = r.body.value("error", std::string("failed"));
  if (!why.empty()) {
    ++result_.reference_failures;
    message(
        fmt::format("warning: {} workload {}: reference failed: {}; its evaluations are "
                    "skipped",
                    def.name, short_uuid(w.uuid), why));
    return false;
  }
  *kernel = r.body.value("kernel", std::string());
  *timing = timing_from_trials(r.body.at("trials"));
  result_.timed_seconds += timing->timed_ms / 1000.0;
  p.reference_outputs.clear();
  for (const Json& t : schedule["trials"]) p.reference_outputs.push_back(t["check_output"]);
  return true;
}

Trace Run::make_trace(const Definition& def, const Workload& w, const Solution& s,
                      EvaluationStatus status, std::string log, Json env_extra) {
  Trace t;
  t.definition = def.name;
  t.workload = w;
  t.solution = s.name;
  Evaluation e;
  e.status = status;
  e.environment.hardware = hardware_;
  e.environment.libs = {{"fib", std::string(kVersion)}};
  Json extra = host_;
  extra["device"] = o_.device;
  extra["seed"] = seed_;
  extra["worker"] = o_.isolated ? "isolated" : "persistent";
  for (auto it = env_extra.begin(); it != env_extra.end(); ++it) extra[it.key()] = *it;
  e.environment.extra = extra;
  e.timestamp = iso_timestamp();
  e.log = std::move(log);
  t.evaluation = std::move(e);
  return t;
}

// The signature a solution exports ("TTf>T") against what the definition calls it with.
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

Trace Run::evaluate(const Definition& def, const Workload& w, const Solution& s,
                    const BuildResult& build, PreparedWorkload& p, const Timing& ref,
                    const std::string& ref_kernel, double* overhead_ms) {
  const auto t0 = Clock::now();
  Json env{
      {"timer",
       "steady_clock around each call (CLOCK_MONOTONIC); inputs and outputs "
       "evicted from the caches (clflushopt) before every call"},
      {"reference", "native:" + ref_kernel},
      {"reference_threads", o_.threads},
      {"build", Json{{"key", build.key}, {"toolchain", build.toolchain}, {"flags", build.flags}}},
      {"distinct_input_sets", p.trials + p.pool}};
  Json axes = Json::object();
  for (const auto& [k, v] : w.axes) axes[k] = v;
  const std::string who = fmt::format("solution-{}", done_);
  const Json schedule = with_check_outputs(p.schedule, p.dir, who);
  Json req{{"cmd", "evaluate"},
           {"definition", to_json(def)},
           {"var_axes", axes},
           {"solution", Json{{"library", build.shared_object.string()},
                             {"symbol", s.spec.entry_symbol()},
                             {"dps", s.spec.dps()}}},
           {"sets", p.inputs_file},
           {"schedule", schedule}};
  std::optional<std::string> sampling_file;
  if (p.sampling) {
    const int draws = p.eval.extra.value("sampling_validation_trials", 100);
    sampling_file = (p.dir / (who + "-draws.safetensors")).string();
    req["sampling"] = Json{{"set", 0}, {"draws", draws}, {"output", *sampling_file}};
  }
  std::string start_error;
  Worker* worker = nullptr;
  // Starting a worker (the first evaluation, after a crash, or every one with --isolated) is
  // counted apart from the evaluation's overhead: worker_start_seconds.
  double worker_start_ms = 0;
  try {
    const bool starting = !solution_worker_ || !solution_worker_->alive() || o_.isolated;
    const auto start0 = Clock::now();
    worker = &solution_worker();
    if (starting) {
      worker_start_ms = std::chrono::duration<double, std::milli>(Clock::now() - start0).count();
      result_.worker_start_seconds += worker_start_ms / 1000.0;
      ++result_.worker_starts;
    }
  } catch (const Error& e) {
    start_error = e.what();
  }
  // The worker maps a workload's input sets once, for every solution after it: that load is a
  // per-workload cost (counted in workload_setup_seconds), not this evaluation's overhead.
  double input_load_ms = 0, worker_schedule_ms = 0, cache_flush_ms = 0;
  auto finish = [&](Trace t, double timed_ms) {
    if (timed_ms > 0) {
      *overhead_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() -
                     timed_ms - input_load_ms - worker_start_ms - cache_flush_ms;
      result_.cache_flush_seconds += cache_flush_ms / 1000.0;
      result_.workload_setup_seconds += input_load_ms / 1000.0;
      if (t.evaluation->performance) {
        t.evaluation->performance->extra["harness_overhead_ms"] = *overhead_ms;
        t.evaluation->performance->extra["input_load_ms"] = input_load_ms;
        t.evaluation->performance->extra["worker_start_ms"] = worker_start_ms;
        // Of the overhead, what the worker spent around the calls (preparing, checking, writing
        // the checked outputs); the rest is messaging and the orchestrator's judgement.
        t.evaluation->performance->extra["worker_overhead_ms"] =
            std::max(0.0, worker_schedule_ms - timed_ms - cache_flush_ms);
        t.evaluation->performance->extra["cache_flush_ms"] = cache_flush_ms;
      }
    }
    if (o_.isolated) solution_worker_.reset();
    return t;
  };
  if (worker == nullptr) {
    return finish(make_trace(def, w, s, EvaluationStatus::kRuntimeError,
                             "the solution worker could not start: " + start_error, env),
                  0);
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(o_.timeout_seconds));
  const Worker::Reply r = worker->call(req, deadline);
  const CapturedOutput out = worker->take_output();
  std::string output_log;
  if (out.total_bytes > 0) {
    output_log = fmt::format(
        "\n--- solution output ({} bytes{}) ---\n{}", out.total_bytes,
        out.total_bytes > out.head.size() + out.tail.size() ? ", head and tail kept" : "",
        out.text());
  }
  if (r.kind == Worker::ReplyKind::kTimeout) {
    return finish(make_trace(def, w, s, EvaluationStatus::kTimeout,
                             fmt::format("no result within the {} s timeout; the worker was "
                                         "killed{}",
                                         o_.timeout_seconds, output_log),
                             env),
                  0);
  }
  if (r.kind == Worker::ReplyKind::kDied) {
    std::string how = r.died_how;
    // The worker's fault handler names an input the solution wrote to (inputs are read-only).
    const std::string said = out.text();
    if (auto at = said.rfind("fib: the solution modified its input"); at != std::string::npos) {
      const auto end = said.find('\n', at);
      const std::string line = said.substr(at + 5, end == std::string::npos ? end : end - at - 5);
      return finish(make_trace(def, w, s, EvaluationStatus::kRuntimeError,
                               fmt::format("{}: the worker was stopped by the fault ({}){}", line,
                                           how, output_log),
                               env),
                    0);
    }
    if (r.signal == 9)
      how +=
          "; a SIGKILL fib did not send usually means the kernel killed it for being out of memory";
    return finish(
        make_trace(def, w, s, EvaluationStatus::kRuntimeError,
                   fmt::format("the worker running the solution {}{}", how, output_log), env),
        0);
  }
  const Json& body = r.body;
  if (body.contains("load_error")) {
    return finish(make_trace(def, w, s, EvaluationStatus::kCompileError,
                             body["load_error"].get<std::string>() + output_log, env),
                  0);
  }
  if (!body.value("ok", false)) {
    return finish(
        make_trace(def, w, s, EvaluationStatus::kRuntimeError,
                   "the worker failed: " + body.value("error", std::string()) + output_log, env),
        0);
  }
  if (const std::string m = signature_mismatch(def, s, body.value("signature", std::string()));
      !m.empty()) {
    return finish(make_trace(def, w, s, EvaluationStatus::kCompileError, m, env), 0);
  }
  input_load_ms = body.value("load_inputs_ms", 0.0);
  worker_schedule_ms = body.value("schedule_ms", 0.0);
  cache_flush_ms = body.value("cache_flush_ms", 0.0);
  const Timing timing = timing_from_trials(body.at("trials"));
  result_.timed_seconds += timing.timed_ms / 1000.0;
  if (body.contains("failure")) {
    const Json& f = body["failure"];
    return finish(make_trace(def, w, s, EvaluationStatus::kRuntimeError,
                             fmt::format("call #{}: {}{}", f.value("call", 0),
                                         f.value("message", std::string()), output_log),
                             env),
                  timing.timed_ms + timing.warmup_ms);
  }
  std::vector<detail::CheckedCall> calls;
  const Json& trials = body.at("trials");
  for (std::size_t t = 0; t < trials.size(); ++t) {
    const Json& c = trials[t]["checked"];
    if (c.is_null()) continue;
    detail::CheckedCall cc;
    cc.trial = static_cast<int>(t);
    cc.seed = p.set_seeds.at(t);
    cc.solution_outputs = c.at("file").get<std::string>();
    cc.reference_outputs = p.reference_outputs.at(t);
    cc.inputs = p.inputs_file;
    cc.poison = c.value("poison", Json::object());
    calls.push_back(std::move(cc));
  }
  const detail::Judgement j =
      detail::judge(def, builtin_, user_ ? &*user_ : nullptr, o_.cli, calls, sampling_file);
  std::string log = j.log;
  if (j.status == EvaluationStatus::kPassed) {
    std::vector<std::string> seeds;
    for (const auto& c : calls) seeds.push_back(std::to_string(c.seed));
    log = fmt::format("passed {} checked calls (input seeds {}) against native:{}{}", calls.size(),
                      fmt::join(seeds, ", "), ref_kernel,
                      sampling_file ? "; sampling distribution check passed" : "");
  }
  Trace trace = make_trace(def, w, s, j.status, log + output_log, env);
  trace.evaluation->correctness = j.correctness;
  if (j.status == EvaluationStatus::kPassed) {
    Performance perf;
    perf.latency_ms = timing.latency_ms;
    perf.reference_latency_ms = ref.latency_ms;
    perf.speedup_factor = timing.latency_ms > 0 ? ref.latency_ms / timing.latency_ms : 0;
    perf.extra = Json{{"method", "cpu"}, {"solution", timing.detail}, {"reference", ref.detail}};
    trace.evaluation->performance = perf;
  }
  return finish(std::move(trace), timing.timed_ms + timing.warmup_ms);
}

void Run::record(TraceSet& set, Trace t, const Definition& def, const Solution& s) {
  if (o_.save_traces) {
    append_traces(set, std::span<const Trace>(&t, 1));
  }
  ++done_;
  ++result_.evaluations;
  result_.traces.push_back(std::move(t));
  if (cb_.on_evaluation) {
    EvaluationEvent e;
    e.done = done_;
    e.total = total_;
    e.trace = &result_.traces.back();
    e.definition = def.name;
    e.solution = s.name;
    e.workload = result_.traces.back().workload.uuid;
    cb_.on_evaluation(e);
  }
}

bool selected(const std::vector<std::string>& allow, const std::string& name) {
  return allow.empty() || std::find(allow.begin(), allow.end(), name) != allow.end();
}

RunResult Run::go() {
  const auto wall0 = Clock::now();
  if (o_.device != "cpu") {
    throw Error("--device", fmt::format("device '{}' is not supported by this build", o_.device),
                "CUDA devices come with fib's GPU support; use --device cpu");
  }
  TraceSet set = TraceSet::load(o_.dataset);
  builtin_ = builtin_eval_config();
  check_eval_settings(o_.cli, "command line");
  if (o_.config) {
    user_ = load_eval_config(*o_.config);
    std::vector<std::string> ops = set.op_types(), names;
    for (const auto& d : set.definitions()) names.push_back(d.value.name);
    for (const auto& d : check_eval_config_names(*user_, ops, names)) {
      message(d.to_string());
    }
  }
  if (o_.seed) {
    seed_ = *o_.seed;
  } else {
    std::random_device rd;
    seed_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  result_.seed = seed_;
  hardware_ = cpu_model();
  host_ = host_json();

  // Unknown names in the allow-lists are warned about, with suggestions.
  std::vector<std::string> def_names, sol_names;
  for (const auto& d : set.definitions()) def_names.push_back(d.value.name);
  for (const auto& d : set.definitions()) {
    for (const auto& s : set.solutions(d.value.name)) sol_names.push_back(s.value.name);
  }
  for (const auto& n : o_.definitions) {
    if (std::find(def_names.begin(), def_names.end(), n) == def_names.end()) {
      message(fmt::format("warning: no definition named '{}' ({})", n, suggest(n, def_names)));
    }
  }
  for (const auto& n : o_.solutions) {
    if (std::find(sol_names.begin(), sol_names.end(), n) == sol_names.end()) {
      message(fmt::format("warning: no solution named '{}' ({})", n, suggest(n, sol_names)));
    }
  }

  // Finished (definition, workload, solution) triples for --resume.
  std::set<std::tuple<std::string, std::string, std::string>> finished;
  if (o_.resume) {
    for (const auto& d : set.definitions()) {
      for (const auto& t : set.traces(d.value.name)) {
        if (t.value.solution) {
          finished.emplace(d.value.name, t.value.workload.uuid, *t.value.solution);
        }
      }
    }
  }

  // Plan: what will run, so the progress display knows the total.
  struct Planned {
    const Definition* def;
    std::vector<const Solution*> solutions;
  };
  std::vector<Planned> plan;
  BuildOptions bo;
  bo.cache_dir = o_.build_cache;
  bo.abi_include_dir = o_.abi_include_dir;
  bo.force = o_.rebuild;
  for (const auto& d : set.definitions()) {
    const Definition& def = d.value;
    if (!selected(o_.definitions, def.name)) continue;
    Planned pl{&def, {}};
    for (const auto& sr : set.solutions(def.name)) {
      const Solution& s = sr.value;
      if (!selected(o_.solutions, s.name)) continue;
      std::string unsupported, error;
      if (!select_toolchain(s, bo, &unsupported, &error) && !unsupported.empty()) {
        message(
            fmt::format("warning: skipping solution {} ({}): {}", s.name, def.name, unsupported));
        continue;
      }
      pl.solutions.push_back(&s);
    }
    if (pl.solutions.empty()) continue;
    for (const auto& wr : set.workloads(def.name)) {
      for (const Solution* s : pl.solutions) {
        if (finished.count({def.name, wr.value.workload.uuid, s->name})) {
          ++result_.resumed;
        } else {
          ++total_;
        }
      }
    }
    plan.push_back(std::move(pl));
  }
  if (cb_.on_start) cb_.on_start(total_);
  scratch_ = std::make_unique<Scratch>();

  std::map<std::string, BuildResult> builds;
  std::map<std::string, std::string> timed_out_on;  // solution -> workload uuid
  std::map<std::string, int> skipped;
  std::size_t workload_index = 0;
  for (const Planned& pl : plan) {
    const Definition& def = *pl.def;
    std::string why_no_ref;
    if (!reference::find_kernel(def, &why_no_ref)) {
      message(
          fmt::format("warning: {} has no native reference ({}); its solutions are not "
                      "evaluated",
                      def.name, why_no_ref));
      ++result_.reference_failures;
      continue;
    }
    for (const auto& wr : set.workloads(def.name)) {
      const Workload& w = wr.value.workload;
      std::vector<const Solution*> pending;
      for (const Solution* s : pl.solutions) {
        if (!finished.count({def.name, w.uuid, s->name})) pending.push_back(s);
      }
      if (pending.empty()) continue;
      const fs::path dir = scratch_->root() / fmt::format("w{}", workload_index++);
      std::optional<PreparedWorkload> p;
      const auto setup0 = Clock::now();
      Timing ref;
      // Inputs made and written, then the reference run on them: once per workload, shared by
      // every solution (workload_setup_seconds, reported apart from per-evaluation overhead).
      auto setup_done = [&] {
        result_.workload_setup_seconds +=
            std::chrono::duration<double>(Clock::now() - setup0).count() -
            (ref.timed_ms + ref.warmup_ms) / 1000.0;
        ++result_.workloads_prepared;
      };
      try {
        p = prepare(def, wr.value, dir);
      } catch (const Error& e) {
        ++result_.reference_failures;
        message(fmt::format("warning: {} workload {}: cannot materialize inputs: {}", def.name,
                            short_uuid(w.uuid), e.what()));
        done_ += pending.size();
        continue;
      }
      std::string kernel;
      if (!run_reference(def, w, *p, &ref, &kernel)) {
        done_ += pending.size();
        continue;
      }
      setup_done();
      for (const Solution* s : pending) {
        if (auto it = timed_out_on.find(s->name); it != timed_out_on.end()) {
          ++skipped[s->name];
          ++done_;
          message(
              fmt::format("{} on {} workload {}: not run (timed out on workload {} earlier "
                          "in this run); --resume runs it later",
                          s->name, def.name, short_uuid(w.uuid), short_uuid(it->second)));
          continue;
        }
        auto bit = builds.find(s->name);
        if (bit == builds.end()) {
          BuildResult b = build_solution(*s, bo);
          bit = builds.emplace(s->name, std::move(b)).first;
        }
        const BuildResult& b = bit->second;
        if (!b.ok()) {
          record(set,
                 make_trace(def, w, *s, EvaluationStatus::kCompileError,
                            fmt::format("{}\n{}", b.message, b.log),
                            Json{{"build", Json{{"key", b.key}, {"toolchain", b.toolchain}}}}),
                 def, *s);
          continue;
        }
        double overhead_ms = -1;
        Trace t = evaluate(def, w, *s, b, *p, ref, kernel, &overhead_ms);
        if (overhead_ms >= 0) {  // evaluations that ran to the end (not killed at a deadline)
          result_.overhead_seconds += overhead_ms / 1000.0;
          ++result_.overhead_evaluations;
        }
        if (t.evaluation->status == EvaluationStatus::kTimeout) timed_out_on[s->name] = w.uuid;
        record(set, std::move(t), def, *s);
      }
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  }
  solution_worker_.reset();
  reference_worker_.reset();
  result_.wall_seconds = std::chrono::duration<double>(Clock::now() - wall0).count();
  result_.summary = detail::summarize_run(result_.traces, set, skipped);
  return std::move(result_);
}
}  // namespace

RunResult run_benchmark(const RunOptions& options, const RunCallbacks& callbacks) {
  Run run(options, callbacks);
  return run.go();
}

}  // namespace fib::bench
