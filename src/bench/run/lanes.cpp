#include "lanes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>

#include "builds_ahead.h"
#include "evaluate.h"
#include "fib/bench/run/test_hooks.h"
#include "inputs_ahead.h"
#include "outcome.h"
#include "prepare.h"
#include "sandbox.h"

namespace fib::bench::detail {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Judgements a lane lets run beside its evaluations: enough that a run of short evaluations
// does not wait on the judge, few enough not to crowd the host's cores.
constexpr std::size_t kJudgementsInFlight = 4;

// The workload's folder (inputs, checked outputs) goes once nothing reads it any more: when
// its item is done and its last judgement, which may run beside the next item, is made.
struct RemoveWhenDone {
  explicit RemoveWhenDone(std::filesystem::path d) : dir(std::move(d)) {}
  RemoveWhenDone(const RemoveWhenDone&) = delete;  // one owner: only the last holder removes
  RemoveWhenDone& operator=(const RemoveWhenDone&) = delete;
  ~RemoveWhenDone() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::filesystem::path dir;
};

// A workload ready for its solutions: inputs made, the reference run on them.
struct ReadyWorkload {
  PreparedWorkload prepared;
  ReferenceRun reference;
  std::shared_ptr<RemoveWhenDone> files;
};

// A build is made per solution and architecture set.
std::string build_key(const Lane& lane, const Solution& s) {
  return s.name + "@" + fmt::format("{}", fmt::join(lane.cuda_architectures, ","));
}

class LaneLoop {
 public:
  LaneLoop(RunState& run, std::vector<std::unique_ptr<Lane>>& lanes,
           const std::vector<WorkItem>& items, TraceSet& set)
      : run_(run),
        lanes_(lanes),
        items_(items),
        set_(set),
        inputs_(PrepareSettings{run.options, run.builtin, run.user ? &*run.user : nullptr, run.seed,
                                run.gpu, inputs_made_on_device(run.options, run.gpu)},
                run.scratch->root(), items, run.gpu && run.options.prepare_ahead) {
    for (auto& lane : lanes_) {
      lane->reference = std::make_unique<ReferenceStage>(reference_setup(*lane));
    }
    start_builds_ahead();
  }

  void go();

 private:
  void start_builds_ahead();
  void wait_for_builds_before_timing(const Lane& lane);
  void loop(Lane& lane);
  void run_item(Lane& lane, std::size_t k);
  std::optional<ReadyWorkload> ready_workload(Lane& lane, const WorkItem& item, std::size_t k);
  bool skipped_after_timeout(Lane& lane, const Solution& s, const Definition& def,
                             const Workload& w);
  const BuildResult& build_for(Lane& lane, const Solution& s);
  bool build_failed_already(const Lane& lane, const Solution& s);
  void record_build_failure(Lane& lane, const WorkItem& item, const Solution& s,
                            const BuildResult& b);
  void evaluate_solution(Lane& lane, const WorkItem& item, const Solution& s, ReadyWorkload& ready);
  void count(Lane& lane, const Evaluated& e, const Solution& s, const Workload& w);
  void judge_beside(Lane& lane, const WorkItem& item, const Solution& s,
                    std::shared_ptr<RemoveWhenDone> files, std::function<Outcome()> judge);
  void settle(Lane& lane, std::size_t keep = 0);
  void record(Lane& lane, Trace t, const Definition& def, const Solution& s);
  std::size_t progress() const;
  EvaluateSettings evaluate_settings(const Lane& lane);
  ReferenceSetup reference_setup(const Lane& lane) const;

  RunState& run_;
  std::vector<std::unique_ptr<Lane>>& lanes_;
  const std::vector<WorkItem>& items_;
  TraceSet& set_;
  InputMaker inputs_;
  // The lanes take their items from one queue, and the first failure stops them all.
  std::mutex queue_mu_;
  std::size_t next_ = 0;  // the next item a free lane takes
  std::exception_ptr failure_;
  // One build per solution and architecture set, whichever lane needs it first: held while it
  // builds, so the other lanes wait for that build instead of making their own.
  std::mutex builds_mu_;
  std::map<std::string, BuildResult> builds_;  // solution@architectures -> its build
  // The run's builds made ahead on several cores, for the architecture set every lane shares
  // (lanes of other GPUs build their own as they meet them).
  std::unique_ptr<BuildsAhead> ahead_;
  std::vector<std::string> ahead_architectures_;
  // A timeout on any lane keeps its solution from the later items of every lane.
  std::mutex timeouts_mu_;
  std::map<std::string, std::string> timed_out_on_;  // solution -> workload uuid
  std::atomic<std::size_t> evaluation_counter_{0};   // names scratch files uniquely across lanes
};

void LaneLoop::go() {
  if (lanes_.size() == 1) {
    loop(*lanes_.front());
  } else {
    std::vector<std::thread> threads;
    for (auto& lane : lanes_) threads.emplace_back([this, &lane] { loop(*lane); });
    for (auto& t : threads) t.join();
  }
  inputs_.wait_all();  // left over when a lane failed: their files go with the scratch
  for (auto& lane : lanes_) {
    lane->solution.reset();
    lane->parked.clear();
    lane->reference.reset();
  }
  if (failure_) std::rethrow_exception(failure_);
}

// Every solution of the run, in the order the lanes meet them, built on `build_jobs` host
// threads (0: one per core). Without a shared architecture set, or with one job, each lane
// builds when it meets a solution, one build at a time.
void LaneLoop::start_builds_ahead() {
  const unsigned jobs = run_.options.build_jobs ? run_.options.build_jobs
                                                : std::max(1u, std::thread::hardware_concurrency());
  if (jobs <= 1 || lanes_.empty()) return;
  for (const auto& lane : lanes_)
    if (lane->cuda_architectures != lanes_.front()->cuda_architectures) return;
  std::vector<const Solution*> order;
  for (const WorkItem& item : items_)
    for (const Solution* s : item.pending) order.push_back(s);
  if (order.empty()) return;
  BuildOptions bo = run_.build;
  bo.cuda_architectures = ahead_architectures_ = lanes_.front()->cuda_architectures;
  ahead_ = std::make_unique<BuildsAhead>(std::move(order), std::move(bo), jobs);
  run_.activity(fmt::format("building the run's solutions on {} threads", ahead_->jobs()));
}

// A CPU lane times nothing (references included) while compilers run on the host's cores.
void LaneLoop::wait_for_builds_before_timing(const Lane& lane) {
  if (!ahead_ || lane.device.is_cuda()) return;
  run_.activity("waiting for the builds ahead");
  ahead_->wait_idle();
}

void LaneLoop::loop(Lane& lane) {
  try {
    wait_for_builds_before_timing(lane);
    while (true) {
      std::size_t k;
      {
        std::lock_guard<std::mutex> lock(queue_mu_);
        if (next_ >= items_.size() || failure_) break;
        k = next_++;
        // As many items ahead as there are lanes, plus three: slow workloads (a naive GEMM
        // takes seconds) leave time to make inputs for a run of short ones after them, which
        // a lane gets through faster than one item's inputs are made.
        for (std::size_t a = next_; a < next_ + lanes_.size() + 3; ++a) inputs_.prepare_ahead(a);
      }
      run_item(lane, k);
    }
    settle(lane);
  } catch (...) {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (!failure_) failure_ = std::current_exception();
  }
  // After a failure: the judgements in flight still read scratch files and record traces.
  while (!lane.judging.empty()) {
    try {
      settle(lane);
    } catch (...) {
    }
  }
}

// Whether the solution's build is known to have failed without waiting for one: its trace
// needs neither the workload's inputs nor the reference.
bool LaneLoop::build_failed_already(const Lane& lane, const Solution& s) {
  const std::string key = build_key(lane, s);
  {
    std::lock_guard<std::mutex> lock(builds_mu_);
    if (const auto it = builds_.find(key); it != builds_.end()) return !it->second.ok();
  }
  return ahead_ && lane.cuda_architectures == ahead_architectures_ && ahead_->failed(s.name);
}

void LaneLoop::run_item(Lane& lane, std::size_t k) {
  const WorkItem& item = items_[k];
  // Solutions that failed to build get their traces at once (a compile error answers without
  // the workload's inputs or its reference run); only the others wait for them.
  std::vector<const Solution*> runnable;
  for (const Solution* s : item.pending) {
    if (!build_failed_already(lane, *s)) {
      runnable.push_back(s);
    } else if (!skipped_after_timeout(lane, *s, *item.def, item.workload->workload)) {
      record_build_failure(lane, item, *s, build_for(lane, *s));
    }
  }
  if (runnable.empty()) {
    inputs_.discard(k);
    return;
  }
  std::optional<ReadyWorkload> ready = ready_workload(lane, item, k);
  if (!ready) {
    lane.totals.update([&](Totals& t) { t.done += runnable.size(); });
    return;
  }
  // Workers of solutions this item has none of (another definition's) are ended.
  std::vector<std::string> names;
  for (const Solution* s : runnable) names.push_back(s->name);
  lane.keep_parked_only(names);
  for (const Solution* s : runnable) {
    if (skipped_after_timeout(lane, *s, *item.def, item.workload->workload)) continue;
    evaluate_solution(lane, item, *s, *ready);
  }
}

// Inputs made and written, then the reference run on them: once per workload, shared by every
// solution (workload_setup_seconds, reported apart from per-evaluation overhead).
std::optional<ReadyWorkload> LaneLoop::ready_workload(Lane& lane, const WorkItem& item,
                                                      std::size_t k) {
  const Definition& def = *item.def;
  const Workload& w = item.workload->workload;
  const auto setup0 = Clock::now();
  InputMaker::Taken taken = inputs_.take(k);
  lane.totals.update([&](Totals& t) {
    t.setup.inputs_seconds += taken.item.seconds;
    t.setup.inputs_made_ahead += taken.was_ready ? 1 : 0;
    t.setup.inputs_wait_seconds += seconds_since(setup0);
  });
  if (!taken.item.workload) {
    lane.totals.update([](Totals& t) { ++t.counts.reference_failures; });
    run_.message(fmt::format("warning: {} workload {}: cannot materialize inputs: {}", def.name,
                             short_uuid(w.uuid), taken.item.error));
    return std::nullopt;
  }
  ReadyWorkload ready{std::move(*taken.item.workload), {}, nullptr};
  ready.files = std::make_shared<RemoveWhenDone>(ready.prepared.dir);
  const auto reference0 = Clock::now();
  // From the reference cache where it holds the run (same reference, inputs, schedule and
  // hardware), else run, and stored there when it succeeds.
  run_.activity(fmt::format("reference on {} workload {}", def.name, w.uuid.substr(0, 8)));
  ready.reference = lane.reference->run(def, w, item.reference, ready.prepared);
  const double reference_seconds = seconds_since(reference0);
  const ReferenceRun& ref = ready.reference;
  if (ready.reference.cache != "hit" && !ref.ok) {
    lane.totals.update([&](Totals& t) {
      t.setup.reference_seconds += reference_seconds;
      ++t.counts.reference_failures;
    });
    run_.message(
        fmt::format("warning: {} workload {}: reference failed: {}; its evaluations are skipped",
                    def.name, short_uuid(w.uuid), ref.error));
    return std::nullopt;
  }
  lane.totals.update([&](Totals& t) {
    t.setup.reference_seconds += reference_seconds;
    ++t.setup.workloads_prepared;
    if (ref.cache == "hit") {
      // Its latency was measured when the entry was made: neither timed nor warmup time here.
      ++t.reference_runs_reused;
      t.setup.workload_setup_seconds += seconds_since(setup0);
      return;
    }
    t.timing.timed_seconds += ref.timing.timed_ms / 1000.0;
    t.timing.warmup_seconds += ref.timing.warmup_ms / 1000.0;
    t.setup.workload_setup_seconds +=
        seconds_since(setup0) - (ref.timing.timed_ms + ref.timing.warmup_ms) / 1000.0;
  });
  return ready;
}

// A solution that timed out earlier in the run is not run again (--resume runs it later).
bool LaneLoop::skipped_after_timeout(Lane& lane, const Solution& s, const Definition& def,
                                     const Workload& w) {
  std::string timed_out_workload;
  {
    std::lock_guard<std::mutex> lock(timeouts_mu_);
    const auto it = timed_out_on_.find(s.name);
    if (it == timed_out_on_.end()) return false;
    timed_out_workload = it->second;
  }
  lane.totals.update([&](Totals& t) {
    ++t.skipped[s.name];
    ++t.done;
  });
  run_.message(
      fmt::format("{} on {} workload {}: not run (timed out on workload {} earlier in this run); "
                  "--resume runs it later",
                  s.name, def.name, short_uuid(w.uuid), short_uuid(timed_out_workload)));
  return true;
}

// Builds are cached per solution and architecture set: made ahead by the pool, or by the first
// lane that needs one while the others wait for it (build_solution is safe across processes).
const BuildResult& LaneLoop::build_for(Lane& lane, const Solution& s) {
  const std::string key = build_key(lane, s);
  {
    std::lock_guard<std::mutex> lock(builds_mu_);
    if (const auto it = builds_.find(key); it != builds_.end()) return it->second;
  }
  if (ahead_ && lane.cuda_architectures == ahead_architectures_ && ahead_->scheduled(s.name)) {
    BuildResult built = ahead_->take(s.name);  // waits without holding the other lanes up
    const double seconds = built.seconds;
    std::lock_guard<std::mutex> lock(builds_mu_);
    const auto [it, first] = builds_.emplace(key, std::move(built));
    if (first) lane.totals.update([&](Totals& t) { t.timing.build_seconds += seconds; });
    return it->second;
  }
  std::lock_guard<std::mutex> lock(builds_mu_);
  auto it = builds_.find(key);
  if (it == builds_.end()) {
    BuildOptions bo = run_.build;
    bo.cuda_architectures = lane.cuda_architectures;
    run_.activity(fmt::format("building {}", s.name));
    BuildResult built = build_solution(s, bo);
    lane.totals.update([&](Totals& t) { t.timing.build_seconds += built.seconds; });
    it = builds_.emplace(key, std::move(built)).first;
  }
  return it->second;
}

EvaluateSettings LaneLoop::evaluate_settings(const Lane& lane) {
  WorkerSpec worker = worker_spec(run_.options, run_.gpu, run_.scratch->root(), "solution");
  if (run_.sandbox.spec.enabled()) {
    worker.sandbox = run_.sandbox.spec;
    worker.sandbox.box = lane.box;
    if (test_hooks::pen().box_at_its_real_path) worker.sandbox.box_inside = lane.box;
  }
  return EvaluateSettings{run_.options, run_.builtin, run_.user ? &*run_.user : nullptr,
                          std::move(worker), [this](const std::string& m) { run_.message(m); }};
}

// The lane's references. The reference worker runs only fib's code, in the same sandbox all the
// same: a box of its own, so nothing a solution worker leaves can reach it, and a flaw in fib's
// parsing of a hostile dataset's definitions or workloads stays contained. A definition's
// PyTorch `reference` is code from the dataset: it runs in the sandbox too, in a box of its own,
// seeing the python that runs it and fib's bridge besides what a worker sees.
ReferenceSetup LaneLoop::reference_setup(const Lane& lane) const {
  const RunOptions& o = run_.options;
  ReferenceSetup setup{.device = lane.device,
                       .hardware = lane.hardware,
                       .gpu_timer = std::string(option_name(o.gpu_timer)),
                       .timeout_seconds = o.timeout_seconds,
                       .threads = o.threads,
                       .worker = worker_spec(o, run_.gpu, run_.scratch->root(), "reference"),
                       .python = run_.python ? &*run_.python : nullptr,
                       .bridge_dir = run_.python_bridge_dir,
                       .python_sandbox = {},
                       .cache = run_.reference_cache.get()};
  if (!run_.sandbox.spec.enabled()) return setup;
  setup.worker.sandbox = run_.sandbox.spec;
  setup.worker.sandbox.box = lane.reference_box;
  if (run_.python) {
    setup.python_sandbox = run_.sandbox.spec;
    setup.python_sandbox.box = lane.python_reference_box;
    std::vector<std::filesystem::path> extra = setup.python_sandbox.read_only;
    for (std::filesystem::path& p : python_paths(*run_.python)) extra.push_back(std::move(p));
    extra.push_back(run_.python_bridge_dir);
    setup.python_sandbox.read_only = sandbox_read_only_paths(o.worker_executable, extra);
  }
  return setup;
}

// The trace of a solution that could not be built: a compile error, or a runtime error where
// nothing was compiled (a language or binding this host cannot run is no compile error).
void LaneLoop::record_build_failure(Lane& lane, const WorkItem& item, const Solution& s,
                                    const BuildResult& b) {
  Outcome failed;
  failed.status = b.status == BuildStatus::kUnsupported ? EvaluationStatus::kRuntimeError
                                                        : EvaluationStatus::kCompileError;
  failed.log = fmt::format("{}\n{}", b.message, b.log);
  failed.environment = Json{{"build", Json{{"key", b.key},
                                           {"toolchain", b.toolchain},
                                           {"sandbox", b.sandboxed ? "bubblewrap" : "none"}}}};
  if (failed.status == EvaluationStatus::kCompileError) add_compiler_messages(failed, s, b);
  settle(lane);  // the judgements before it first: traces are recorded in the order they ran
  record(lane,
         make_trace(run_.trace_context(), lane, *item.def, item.workload->workload, s,
                    std::move(failed)),
         *item.def, s);
}

void LaneLoop::evaluate_solution(Lane& lane, const WorkItem& item, const Solution& s,
                                 ReadyWorkload& ready) {
  const Definition& def = *item.def;
  const Workload& w = item.workload->workload;
  const BuildResult& b = build_for(lane, s);
  if (!b.ok()) {
    record_build_failure(lane, item, s, b);
    return;
  }
  const std::string name = fmt::format("solution-{}", progress() + (evaluation_counter_++ << 20));
  run_.activity(fmt::format("evaluating {} on {}", s.name, w.uuid.substr(0, 8)));
  // GPU lanes judge on the host while the GPU runs the next evaluation (or the next
  // workload's reference): the judge is host work, and the GPU would otherwise idle.
  Evaluated e = evaluate(lane, EvaluationJob{def, w, s, b, ready.prepared, ready.reference, name},
                         evaluate_settings(lane),
                         /*judge_later=*/run_.options.judge_beside.value_or(run_.gpu));
  count(lane, e, s, w);
  if (e.outcome) {
    settle(lane);  // the judgements before it first: traces are recorded in the order they ran
    record(lane, make_trace(run_.trace_context(), lane, def, w, s, std::move(*e.outcome)), def, s);
    return;
  }
  judge_beside(lane, item, s, ready.files, std::move(e.judge));
}

// The evaluation's share of the run's totals; a timeout keeps its solution from later items.
void LaneLoop::count(Lane& lane, const Evaluated& e, const Solution& s, const Workload& w) {
  const EvaluationCosts& c = e.costs;
  lane.totals.update([&](Totals& t) {
    if (c.worker_started) {
      t.workers.start_seconds += c.worker_start_ms / 1000.0;
      ++t.workers.starts;
    }
    t.timing.timed_seconds += c.timed_ms / 1000.0;
    t.timing.warmup_seconds += c.warmup_ms / 1000.0;
    if (e.overhead_ms >= 0) {  // evaluations that ran to the end (not killed at a deadline)
      t.timing.overhead_seconds += e.overhead_ms / 1000.0;
      ++t.timing.overhead_evaluations;
      t.timing.cache_flush_seconds += c.cache_flush_ms / 1000.0;
      t.setup.workload_setup_seconds += c.input_load_ms / 1000.0;
    }
  });
  if (e.outcome && e.outcome->status == EvaluationStatus::kTimeout) {
    std::lock_guard<std::mutex> lock(timeouts_mu_);
    timed_out_on_[s.name] = w.uuid;
  }
}

void LaneLoop::judge_beside(Lane& lane, const WorkItem& item, const Solution& s,
                            std::shared_ptr<RemoveWhenDone> files, std::function<Outcome()> judge) {
  settle(lane, kJudgementsInFlight - 1);
  std::shared_future<void> before =
      lane.judging.empty() ? std::shared_future<void>() : lane.judging.back();
  const Definition* def = item.def;
  const Workload* w = &item.workload->workload;
  lane.judging.push_back(
      std::async(std::launch::async, [this, &lane, def, w, &s, before, files = std::move(files),
                                      judge = std::move(judge)] {
        Trace t = make_trace(run_.trace_context(), lane, *def, *w, s, judge());
        if (before.valid()) before.wait();  // recorded in the order they ran
        record(lane, std::move(t), *def, s);
      }).share());
}

// Waits until at most `keep` of the lane's judgements are in flight (the oldest first; their
// traces are then recorded). Rethrows what a judgement threw.
void LaneLoop::settle(Lane& lane, std::size_t keep) {
  while (lane.judging.size() > keep) {
    const auto t0 = Clock::now();
    lane.judging.front().wait();
    const double waited = seconds_since(t0);
    lane.totals.update([waited](Totals& t) { t.timing.judge_wait_seconds += waited; });
    const std::shared_future<void> done = std::move(lane.judging.front());
    lane.judging.pop_front();
    done.get();
  }
}

// Evaluations finished or given up so far, over all lanes.
std::size_t LaneLoop::progress() const {
  std::size_t n = 0;
  for (const auto& lane : lanes_) n += lane->totals.done();
  return n;
}

void LaneLoop::record(Lane& lane, Trace t, const Definition& def, const Solution& s) {
  // Signed here, where every trace passes once complete, so that anything added to it is covered.
  if (run_.options.signing_key) sign_trace(t, *run_.options.signing_key);
  std::lock_guard<std::mutex> lock(run_.traces_mu);
  if (run_.options.save_traces) append_traces(set_, std::span<const Trace>(&t, 1));
  lane.totals.update([](Totals& totals) {
    ++totals.done;
    ++totals.counts.evaluations;
  });
  run_.result.traces.push_back(std::move(t));
  if (run_.callbacks.on_evaluation) {
    EvaluationEvent e;
    e.done = progress();
    e.total = run_.total;
    e.trace = &run_.result.traces.back();
    e.definition = def.name;
    e.solution = s.name;
    e.workload = run_.result.traces.back().workload.uuid;
    run_.callbacks.on_evaluation(e);
  }
}

}  // namespace

std::size_t build_solutions(RunState& run, const std::vector<std::unique_ptr<Lane>>& lanes,
                            const std::vector<WorkItem>& items) {
  std::vector<const Solution*> order;
  for (const WorkItem& item : items)
    for (const Solution* s : item.pending) order.push_back(s);
  std::set<std::vector<std::string>> architectures;
  for (const auto& lane : lanes) architectures.insert(lane->cuda_architectures);
  const unsigned jobs = run.options.build_jobs ? run.options.build_jobs
                                               : std::max(1u, std::thread::hardware_concurrency());
  std::size_t failed = 0;
  for (const auto& archs : architectures) {
    BuildOptions bo = run.build;
    bo.cuda_architectures = archs;
    BuildsAhead pool(order, std::move(bo), jobs);
    std::set<std::string> seen;
    for (const Solution* s : order) {
      if (!seen.insert(s->name).second) continue;
      const BuildResult b = pool.take(s->name);
      run.result.timing.build_seconds += b.seconds;
      failed += b.ok() ? 0 : 1;
    }
  }
  return failed;
}

void run_lanes(RunState& run, std::vector<std::unique_ptr<Lane>>& lanes,
               const std::vector<WorkItem>& items, TraceSet& set) {
  LaneLoop(run, lanes, items, set).go();
}

}  // namespace fib::bench::detail
