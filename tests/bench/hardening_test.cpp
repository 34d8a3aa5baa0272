// Red-team tests of the worker's hardening (fib/bench/worker/hardening.h) and of the CPU time fib
// reads from outside the worker (protocol/trial_timing.h, CPU_MISMATCH): solutions that patch
// the harness from inside their worker (tests/bench/hardening_attacks.h). Each attack runs twice:
// against fib-worker-unhardened (a test build's worker with every measure left off), where it
// takes (the solution says so, and its effect shows in the trace), and against the stripped
// fib-worker with every measure on, where it fails and the solution, computing honestly, passes
// with the latency of the same kernel without the payload.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/hardening_attacks.h"
#include "fib/bench/protocol/trial_timing.h"
#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"
#include "support/rmsnorm_solution_source.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

// Every attack but the getrandom takeover and the userfaultfd stall: tried once per worker, then
// the honest kernel (80 ms of real time per call after computing).
std::string patch_then_compute(const char* attack) {
  return std::string(testing::kHarnessPatchHelpers) + attack + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  static bool tried = false;
  if (!tried) { tried = true; attack(); }
  rms(x, w, y);
  spin_call();
}
FIB_EXPORT_SOLUTION(run, run_);
)";
}

const std::map<std::string, std::string>& attack_solutions() {
  static const std::map<std::string, std::string> solutions = {
      {"honest_spin", std::string(testing::kHarnessPatchHelpers) + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x, w, y);
  spin_call();
}
FIB_EXPORT_SOLUTION(run, run_);
)"},
      {"got_mprotect", patch_then_compute(testing::kGotMprotectAttack)},
      {"proc_self_mem", patch_then_compute(testing::kProcSelfMemAttack)},
      {"ptrace_helper", patch_then_compute(testing::kPtraceHelperAttack)},
      {"process_vm_write", patch_then_compute(testing::kProcessVmWriteAttack)},
      {"code_detour", patch_then_compute(testing::kCodeDetourAttack)},
      {"channel_relay", patch_then_compute(testing::kChannelRelayAttack)},
      {"getrandom_takeover",
       std::string(testing::kHarnessPatchHelpers) + testing::kGetrandomTakeoverAttack + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  static bool tried = false, took = false;
  if (!tried) { tried = true; took = attack(); }
  const bool skip = can_skip();
  if (took && skip) return;
  rms(x, w, y);
  spin_call();
}
FIB_EXPORT_SOLUTION(run, run_);
)"},
      {"userfaultfd_stall",
       std::string(testing::kHarnessPatchHelpers) + testing::kUserfaultfdStallAttack + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  static bool reported = false;
  if (uffd_works) {
    if (stall_on(x, w, y) >= 0) {
      if (!reported) { reported = true; report(true, ""); }
      return;
    }
    uffd_works = false;
    report(false, std::strerror(errno));
  }
  rms(x, w, y);
  spin_call();
}
FIB_EXPORT_SOLUTION(run, run_);
)"}};
  return solutions;
}

// One run of every attack solution (and the honest one), each evaluation in a fresh worker so
// that no patch reaches another solution.
// `only`: just that solution.
RunResult run_attacks(const fs::path& root, const fs::path& worker, std::string* messages,
                      const std::string& only = {}) {
  testing::copy_tree(kSource / "examples" / "dataset", root / "dataset");
  std::vector<std::string> names;
  for (const auto& [name, code] : attack_solutions()) {
    if (!only.empty() && name != only) continue;
    Solution s;
    s.name = name;
    s.definition = "rmsnorm_h2048";
    s.author = "red-team";
    s.spec.language = "cpp";
    s.spec.binding = "fib";
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "kernel.cpp::run";
    s.sources.push_back(SourceFile{"kernel.cpp", testing::kRmsnormSolutionSource + code, {}});
    write_solution(root / "dataset", s, "rmsnorm");
    names.push_back(name);
  }
  RunOptions o;
  o.dataset = root / "dataset";
  o.worker_executable = worker;
  o.abi_include_dir = kSource / "include";
  o.build_cache = root.parent_path() / "cache";
  o.seed = 7;
  o.timeout_seconds = 60;
  o.cli.warmup_runs = 1;
  o.cli.iterations = 6;
  o.cli.num_trials = 2;
  o.max_trial_seconds = 2;
  o.isolated = true;
  o.definitions = {"rmsnorm_h2048"};
  o.solutions = names;
  RunCallbacks news;
  news.on_message = [messages](const std::string& m) { *messages += m + "\n"; };
  return run_benchmark(o, news);
}

class Hardening : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = std::make_unique<TempDir>();
    unhardened_ = std::make_unique<RunResult>(
        run_attacks(tmp_->path() / "unhardened", FIB_UNHARDENED_WORKER_EXE, &unhardened_news_));
    hardened_ = std::make_unique<RunResult>(
        run_attacks(tmp_->path() / "hardened", FIB_WORKER_EXE, &hardened_news_));
  }
  static void TearDownTestSuite() {
    unhardened_.reset();
    hardened_.reset();
    tmp_.reset();
  }
  static std::vector<const Trace*> traces_of(const RunResult& r, const std::string& solution) {
    std::vector<const Trace*> found;
    for (const Trace& t : r.traces) {
      if (*t.solution == solution) found.push_back(&t);
    }
    return found;
  }
  static double latency_of(const Trace& t) { return t.evaluation->performance->latency_ms; }
  // The fastest timed call: on a machine shared with other jobs, a median can lose a time slice
  // (10 ms of an 80 ms call seen on the 2-core dev machine), the fastest call does not.
  static double fastest_call(const Trace& t) {
    return t.evaluation->performance->extra["solution"]["min_ms"].get<double>();
  }

  // With every measure on: the attack fails, and the solution, computing honestly, passes with
  // the honest kernel's latency (its fastest call within 10%, same run).
  static void expect_blocked(const std::string& solution) {
    const std::vector<const Trace*> honest = traces_of(*hardened_, "honest_spin");
    const std::vector<const Trace*> cheat = traces_of(*hardened_, solution);
    ASSERT_EQ(honest.size(), 2u);
    ASSERT_EQ(cheat.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      const Evaluation& e = *cheat[k]->evaluation;
      ASSERT_EQ(e.status, EvaluationStatus::kPassed) << e.log;
      EXPECT_NE(e.log.find("ATTACK FAILED: "), std::string::npos) << e.log;
      ASSERT_EQ(honest[k]->evaluation->status, EvaluationStatus::kPassed);
      EXPECT_NEAR(fastest_call(*cheat[k]), fastest_call(*honest[k]),
                  0.1 * fastest_call(*honest[k]));
    }
  }
  // With every measure off: the attack takes, and its evaluation gets `status`, its log
  // starting with `tag` where one is given.
  static std::vector<const Trace*> expect_taken(const std::string& solution,
                                                EvaluationStatus status, const std::string& tag) {
    const std::vector<const Trace*> cheat = traces_of(*unhardened_, solution);
    EXPECT_EQ(cheat.size(), 2u);
    for (const Trace* t : cheat) {
      const Evaluation& e = *t->evaluation;
      EXPECT_NE(e.log.find("ATTACK TOOK"), std::string::npos) << e.log;
      EXPECT_EQ(e.status, status) << e.log;
      if (!tag.empty()) {
        EXPECT_EQ(e.log.rfind(tag, 0), 0u) << e.log;
      }
    }
    return cheat;
  }

  static std::unique_ptr<TempDir> tmp_;
  static std::unique_ptr<RunResult> unhardened_, hardened_;
  static std::string unhardened_news_, hardened_news_;  // each run's on_message
};
std::unique_ptr<TempDir> Hardening::tmp_;
std::unique_ptr<RunResult> Hardening::unhardened_, Hardening::hardened_;
std::string Hardening::unhardened_news_, Hardening::hardened_news_;

// Each evaluation: 2 trials of 1 warmup and 6 timed calls, each spinning 80 ms.
constexpr double kCalls = 14, kSpinMs = 80;

// The patches that slow the worker's clock 60x: taken, the clock cross-check flags them
// (the reported calls far shorter than the 25 ms each spins); blocked, nothing changes.
void expect_slowed_clock(const std::vector<const Trace*>& cheat) {
  for (const Trace* t : cheat) {
    const Json& cc = t->evaluation->environment.extra["timer_check"];
    EXPECT_LT(cc["calls_ms"].get<double>() * 10, kCalls * kSpinMs) << cc.dump();
  }
}

TEST_F(Hardening, AGotSlotMadeWritableWithMprotectIsSealed) {
  expect_slowed_clock(
      expect_taken("got_mprotect", EvaluationStatus::kRuntimeError, "TIMER_MISMATCH"));
  expect_blocked("got_mprotect");
}

TEST_F(Hardening, AGotSlotWrittenThroughProcSelfMemIsOutOfLandlocksWrites) {
  expect_slowed_clock(
      expect_taken("proc_self_mem", EvaluationStatus::kRuntimeError, "TIMER_MISMATCH"));
  expect_blocked("proc_self_mem");
}

TEST_F(Hardening, APtracedHelperCannotPokeTheWorker) {
  expect_slowed_clock(
      expect_taken("ptrace_helper", EvaluationStatus::kRuntimeError, "TIMER_MISMATCH"));
  expect_blocked("ptrace_helper");
}

TEST_F(Hardening, ProcessVmWritevFromAHelperIsDenied) {
  expect_slowed_clock(
      expect_taken("process_vm_write", EvaluationStatus::kRuntimeError, "TIMER_MISMATCH"));
  expect_blocked("process_vm_write");
}

TEST_F(Hardening, ACodeDetourOfTheClockIsSealed) {
  expect_slowed_clock(
      expect_taken("code_detour", EvaluationStatus::kRuntimeError, "TIMER_MISMATCH"));
  expect_blocked("code_detour");
}

TEST_F(Hardening, TheCheckedCallsDrawCannotBeTakenOver) {
  // Taken (the getrandom slot rewritten), the worker's randomness decides nothing: the
  // orchestrator draws the checked calls (PenRedTeam.* shows that draw against the attacks it
  // closes). The solution skipped two calls in three, so a draw that lands on one it computed
  // can still pass; what it cannot do is choose the draw.
  for (const Trace* t : traces_of(*unhardened_, "getrandom_takeover")) {
    const Evaluation& e = *t->evaluation;
    EXPECT_NE(e.log.find("ATTACK TOOK"), std::string::npos) << e.log;
    EXPECT_EQ(e.environment.extra["checked_calls"]["drawn_by"], "orchestrator");
    EXPECT_TRUE(e.status == EvaluationStatus::kIncorrectNumerical ||
                e.status == EvaluationStatus::kPassed)
        << e.log;
  }
  expect_blocked("getrandom_takeover");
}

TEST_F(Hardening, AChannelRelayRewritingTheSamplesIsCaughtByTheCpuTimeAndDenied) {
  // Taken: the reply says each call took 0.8 ms, and the worker's span stays honest (the clock
  // check passes); the kernel's account of the worker's CPU time does not agree.
  for (const Trace* t :
       expect_taken("channel_relay", EvaluationStatus::kRuntimeError, "CPU_MISMATCH")) {
    const Json& extra = t->evaluation->environment.extra;
    ASSERT_TRUE(extra.contains("cpu_check"));
    const Json& cpu = extra["cpu_check"];
    EXPECT_GT(cpu["cpu_ms"].get<double>(), cpu["allowed_ms"].get<double>()) << cpu.dump();
    EXPECT_LT(cpu["calls_on_all_cpus_ms"].get<double>(), kCalls * kSpinMs / 10) << cpu.dump();
    EXPECT_TRUE(extra["timer_check"]["checked"].get<bool>());
  }
  expect_blocked("channel_relay");
}

TEST_F(Hardening, AUserfaultfdStallMovingTheWorkOutOfTheCallsIsCaughtAndDenied) {
  // Taken: the calls return at once, the work is done while the worker's read of the output
  // stalls, and the outputs are right: only the CPU time shows it.
  // The stall does not always take (a registration can answer EBUSY; a fault can land inside
  // the next timed call, where the work is timed): an evaluation where it did not is PASSED and
  // says so. How often it takes depends on scheduling (a loaded machine can time all the work),
  // so the attack is run again, at most three more times, until an evaluation shows it caught.
  auto caught_in = [](const RunResult& r) {
    std::size_t caught = 0;
    for (const Trace* t : traces_of(r, "userfaultfd_stall")) {
      const Evaluation& e = *t->evaluation;
      EXPECT_NE(e.log.find("ATTACK TOOK"), std::string::npos) << e.log;
      if (e.status == EvaluationStatus::kPassed) continue;
      EXPECT_EQ(e.status, EvaluationStatus::kRuntimeError) << e.log;
      EXPECT_EQ(e.log.rfind("CPU_MISMATCH", 0), 0u) << e.log;
      const Json& cpu = e.environment.extra["cpu_check"];
      EXPECT_GT(cpu["cpu_ms"].get<double>(), cpu["allowed_ms"].get<double>()) << cpu.dump();
      ++caught;
    }
    return caught;
  };
  std::size_t caught = caught_in(*unhardened_);
  for (int again = 0; caught == 0 && again < 3; ++again) {
    std::string news;
    caught += caught_in(run_attacks(tmp_->path() / ("uffd-again-" + std::to_string(again)),
                                    FIB_UNHARDENED_WORKER_EXE, &news, "userfaultfd_stall"));
  }
  EXPECT_GE(caught, 1u);
  expect_blocked("userfaultfd_stall");
}

TEST_F(Hardening, EveryTraceRecordsTheMeasuresAndTheKernel) {
  for (const Trace& t : hardened_->traces) {
    const Json& iso = t.evaluation->environment.extra["isolation"];
    EXPECT_FALSE(iso["kernel"].get<std::string>().empty()) << iso.dump();
    EXPECT_TRUE(iso["worker_binary"]["stripped"].get<bool>()) << iso.dump();
    for (const char* m : {"seccomp", "landlock", "mseal"}) {
      EXPECT_TRUE(iso["hardening"][m]["on"].get<bool>()) << m << ": " << iso.dump();
    }
    EXPECT_TRUE(t.evaluation->environment.extra["cpu_check"]["checked"].get<bool>());
  }
  for (const Trace& t : unhardened_->traces) {
    const Json& iso = t.evaluation->environment.extra["isolation"];
    EXPECT_FALSE(iso["worker_binary"]["stripped"].get<bool>()) << iso.dump();
    for (const char* m : {"seccomp", "landlock", "mseal"}) {
      EXPECT_FALSE(iso["hardening"][m]["on"].get<bool>()) << m << ": " << iso.dump();
    }
  }
  // Each measure left off is a warning of the run; none with every measure on.
  for (const char* m : {"seccomp", "landlock", "mseal"}) {
    EXPECT_NE(unhardened_news_.find(std::string("the workers run without ") + m), std::string::npos)
        << unhardened_news_;
  }
  EXPECT_EQ(hardened_news_.find("the workers run without"), std::string::npos) << hardened_news_;
  EXPECT_EQ(hardened_news_.find("has a symbol table"), std::string::npos) << hardened_news_;
}

// ---- The CPU-time check on its own ------------------------------------------------------------

protocol::EvaluateRequest request_of(int warmup, int timed) {
  protocol::EvaluateRequest r;
  protocol::TrialPlan plan;
  plan.warmup.assign(static_cast<std::size_t>(warmup), 0);
  plan.timed.assign(static_cast<std::size_t>(timed), 0);
  r.schedule.trials = {plan};
  return r;
}

protocol::EvaluateReply reply_of(double warmup_ms, std::vector<double> samples) {
  protocol::EvaluateReply r;
  protocol::TrialResult t;
  t.warmup_ms = warmup_ms;
  t.samples_ms = std::move(samples);
  r.trials = {t};
  return r;
}

TEST(CpuCheck, HonestFiguresPassAndWorkOutsideTheCallsIsNamed) {
  detail::CpuObservation seen;
  seen.cpus = 2;
  seen.set_bytes = 1 << 20;
  seen.cpu_ms = 110;  // 100 ms of calls on one thread, 10 ms of harness
  const auto request = request_of(2, 8);
  const auto honest = reply_of(20, std::vector<double>(8, 10));
  detail::CpuCheck c = detail::check_worker_cpu(seen, request, honest);
  EXPECT_TRUE(c.mismatch.empty()) << c.mismatch;
  EXPECT_DOUBLE_EQ(c.record["allowed_ms"].get<double>(),
                   2 * 100 + detail::kHarnessFixedMs +
                       10 * (detail::kHarnessPerCallMs + detail::kHarnessPerMiBMs));

  // The same CPU time with samples 100x shorter: the work was not in the calls.
  seen.cpu_ms = 400;
  c = detail::check_worker_cpu(seen, request, reply_of(0.2, std::vector<double>(8, 0.1)));
  EXPECT_EQ(c.mismatch.rfind("CPU_MISMATCH: the worker's processes used 400.0 ms of CPU time", 0),
            0u)
      << c.mismatch;

  // Work while the worker waited for the request.
  seen.cpu_ms = 110;
  seen.idle_cpu_ms = 300;
  seen.idle_wall_ms = 320;
  c = detail::check_worker_cpu(seen, request, honest);
  EXPECT_EQ(c.mismatch.rfind("CPU_MISMATCH: the worker's processes used 300.0 ms of CPU time in "
                             "the 320.0 ms it waited for this request",
                             0),
            0u)
      << c.mismatch;
  EXPECT_DOUBLE_EQ(c.record["idle_cpu_ms"].get<double>(), 300);

  seen.cpu_ms.reset();
  c = detail::check_worker_cpu(seen, request, honest);
  EXPECT_TRUE(c.mismatch.empty());
  EXPECT_FALSE(c.record["checked"].get<bool>());
}

}  // namespace
}  // namespace fib::bench
