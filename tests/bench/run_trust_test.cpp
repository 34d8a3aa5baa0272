// Red-team tests of the worker's trust boundary on the CPU (issue #26): a solution that rewrites
// the worker's clock, writes far past its output, makes its read-only inputs writable and
// mutates them, or computes only on the calls it guesses are checked. Each test shows the attack
// doing what it does (the numbers or the effect it aims at) and fib catching it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/red_team_attacks.h"
#include "fib/bench/run/run.h"
#include "fib/bench/run/test_hooks.h"
#include "fib/dataset/trace_set.h"
#include "support/rmsnorm_solution_source.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

// A correct rmsnorm over bfloat16 rows, for the solutions below to call.
const char* kRms = testing::kRmsnormSolutionSource;

class RunTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::copy_tree(kSource / "examples" / "dataset", tmp_.path() / "dataset");
  }
  void add_solution(const std::string& name, const std::string& code) {
    Solution s;
    s.name = name;
    s.definition = "rmsnorm_h2048";
    s.author = "trust";
    s.spec.language = "cpp";
    s.spec.binding = "fib";
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "kernel.cpp::run";
    s.sources.push_back(SourceFile{"kernel.cpp", std::string(kRms) + code, {}});
    write_solution(tmp_.path() / "dataset", s, "rmsnorm");
  }
  RunOptions options(std::vector<std::string> solutions) const {
    RunOptions o;
    o.dataset = tmp_.path() / "dataset";
    o.worker_executable = FIB_EXE;
    o.abi_include_dir = kSource / "include";
    o.build_cache = tmp_.path() / "cache";
    o.seed = 7;
    o.timeout_seconds = 60;
    o.cli.warmup_runs = 2;
    o.cli.iterations = 6;
    o.cli.num_trials = 2;
    o.max_trial_seconds = 2;
    o.definitions = {"rmsnorm_h2048"};
    o.solutions = std::move(solutions);
    return o;
  }
  static const Trace* trace_of(const RunResult& r, const std::string& solution, int k = 0) {
    for (const Trace& t : r.traces) {
      if (*t.solution == solution && k-- == 0) return &t;
    }
    return nullptr;
  }
  TempDir tmp_;
};

// Every call spins 25 ms of real time after computing, so a request takes ~350 ms and a clock
// that runs 60x slow leaves far more unaccounted for than the cross-check allows.
const char* kSpin = testing::kSpinAttack;

TEST_F(RunTrust, AClockRewrittenThroughTheWorkersGotIsFlaggedAndNotRanked) {
  // Finds the worker executable's GOT slot of std::chrono::steady_clock::now (full RELRO leaves
  // it read-only), makes it writable with mprotect and points it at a clock that runs 60x slow
  // from the moment it is installed.
  add_solution("slow_clock", std::string(kSpin) + testing::kSlowClockAttack + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  slow_the_workers_clock();
  rms(x, w, y);
  spin_25ms();
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  add_solution("honest_spin", std::string(kSpin) + R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x, w, y);
  spin_25ms();
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  // The hardened worker refuses the mprotect (its GOT is sealed: Hardening.*); the clock
  // cross-check, the layer behind it, is shown here on a worker without the hardening.
  RunOptions o = options({"honest_spin", "slow_clock"});
  o.worker_executable = FIB_UNHARDENED_WORKER_EXE;
  const RunResult r = run_benchmark(o);
  ASSERT_EQ(r.traces.size(), 4u);
  for (int k = 0; k < 2; ++k) {
    const Trace* honest = trace_of(r, "honest_spin", k);
    ASSERT_NE(honest, nullptr);
    EXPECT_EQ(honest->evaluation->status, EvaluationStatus::kPassed) << honest->evaluation->log;
    const Json& hc = honest->evaluation->environment.extra["timer_check"];
    EXPECT_TRUE(hc["checked"].get<bool>());
    EXPECT_LT(hc["unaccounted_ms"].get<double>(), hc["allowed_ms"].get<double>());

    const Trace* cheat = trace_of(r, "slow_clock", k);
    ASSERT_NE(cheat, nullptr);
    EXPECT_EQ(cheat->evaluation->status, EvaluationStatus::kRuntimeError);
    EXPECT_NE(cheat->evaluation->log.find("TIMER_MISMATCH"), std::string::npos)
        << cheat->evaluation->log;
    // The attack works on the samples: the reported calls are far shorter than the 25 ms each
    // spins (14 calls), which the orchestrator's own observation shows.
    const Json& cc = cheat->evaluation->environment.extra["timer_check"];
    EXPECT_LT(cc["calls_ms"].get<double>() * 10, 14 * 25.0) << cc.dump();
    EXPECT_GT(cc["observed_ms"].get<double>(), 14 * 25.0) << cc.dump();
  }
}

TEST_F(RunTrust, AWriteFarPastAnOutputFaultsAndIsNamed) {
  // 4 KiB past the end of its output: beyond the guard bytes fib checks after the call, into
  // the inaccessible pages after them.
  add_solution("writes_4k_past", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x, w, y);
  y.data_ptr<std::uint16_t>()[x.size(0) * x.size(1) + 2048] = 0x3f80;
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  const RunResult r = run_benchmark(options({"writes_4k_past"}));
  ASSERT_EQ(r.traces.size(), 2u);
  for (const Trace& t : r.traces) {
    EXPECT_EQ(t.evaluation->status, EvaluationStatus::kRuntimeError);
    const std::string& log = t.evaluation->log;
    EXPECT_NE(log.find("wrote past the end of output 'output' (byte "), std::string::npos) << log;
    EXPECT_NE(log.find("in the inaccessible pages after it"), std::string::npos) << log;
  }
}

TEST_F(RunTrust, AnInputMadeWritableAndChangedIsCaughtAndTheNextSolutionSeesItIntact) {
  // mprotect makes the read-only mapping of its weight writable, and the solution changes it
  // (computing its output from the changed weight, as a solution that scribbles on its inputs
  // for scratch would); the honest solution evaluated next in the same worker must see the
  // inputs as they were.
  add_solution("a_unprotects_input", R"(
#include <sys/mman.h>
#include <unistd.h>
#include <cstdint>
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* wp = const_cast<std::uint16_t*>(w.data_ptr<const std::uint16_t>());
  const auto begin = reinterpret_cast<std::uintptr_t>(wp) & ~std::uintptr_t(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(wp + w.size(0));
  if (mprotect(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE) != 0) return;
  for (long c = 0; c < w.size(0); ++c) wp[c] = 0x3f80;  // every weight 1.0
  rms(x, w, y);
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  add_solution("b_honest", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)");
  RunOptions o = options({"a_unprotects_input", "b_honest"});
  const RunResult r = run_benchmark(o);
  ASSERT_EQ(r.traces.size(), 4u);
  for (int k = 0; k < 2; ++k) {
    const Trace* cheat = trace_of(r, "a_unprotects_input", k);
    ASSERT_NE(cheat, nullptr);
    EXPECT_EQ(cheat->evaluation->status, EvaluationStatus::kRuntimeError);
    EXPECT_NE(cheat->evaluation->log.find("modified its input 'weight' (its bytes changed"),
              std::string::npos)
        << cheat->evaluation->log;
    const Trace* honest = trace_of(r, "b_honest", k);
    ASSERT_NE(honest, nullptr);
    EXPECT_EQ(honest->evaluation->status, EvaluationStatus::kPassed) << honest->evaluation->log;
  }
}

TEST_F(RunTrust, ALateWriterLeftBehindCannotReachTheNextSolutionsMemory) {
  // Leaves a thread that keeps writing NaN into the output buffer it was given, long after its
  // evaluation ended: the buffer is retired but never handed out again, so the honest solutions
  // evaluated next in the same worker are unaffected. (Had its address gone to the next
  // solution's output, the thread would overwrite that solution's results; had it been
  // unmapped, the thread's next write would kill the worker under the next solution.)
  add_solution("a_late_writer", R"(
#include <atomic>
#include <chrono>
#include <thread>
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x, w, y);
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return;
  auto* out = y.data_ptr<std::uint16_t>();
  const long n = x.size(0) * x.size(1);
  std::thread([out, n] {
    for (;;) {
      for (long i = 0; i < n; ++i) reinterpret_cast<volatile std::uint16_t*>(out)[i] = 0x7fc0;
      std::this_thread::yield();
    }
  }).detach();
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  add_solution("b_honest", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)");
  add_solution("c_honest", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)");
  const RunResult r = run_benchmark(options({"a_late_writer", "b_honest", "c_honest"}));
  ASSERT_EQ(r.traces.size(), 6u);
  for (int k = 0; k < 2; ++k) {
    for (const char* name : {"b_honest", "c_honest"}) {
      const Trace* t = trace_of(r, name, k);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->evaluation->status, EvaluationStatus::kPassed) << name << t->evaluation->log;
    }
  }
}

TEST_F(RunTrust, ALateThreadReachesTheNextSolutionOnlyInASharedWorker) {
  // Leaves a thread that watches its process for another solution's library and, once one is
  // loaded (the next solution, in a worker shared with it), ends the process under that
  // solution's calls. In a worker of its own (stopped while another solution runs), the thread
  // never sees another solution: the next one passes.
  add_solution("a_late_thread", R"(
#include <dlfcn.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y);
static void watch() {
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&run_), &self);
  const std::string mine = self.dli_fname != nullptr ? self.dli_fname : "";
  for (;;) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      if (line.find("solution.so") != std::string::npos && line.find(mine) == std::string::npos) {
        _exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  rms(x, w, y);
  static std::atomic<bool> started{false};
  if (!started.exchange(true)) std::thread(watch).detach();
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  // Its calls take 3 ms each, so that the thread, polling every millisecond, is scheduled during
  // them even on a loaded machine.
  add_solution("b_honest", R"(
#include <chrono>
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3);
  rms(x, w, y);
  while (std::chrono::steady_clock::now() < until) {
  }
}
FIB_EXPORT_SOLUTION(run, run_);
)");
  // The CPU-time check, held off here, would catch the thread's polling on its own: this shows
  // what a worker per solution alone closes.
  test_hooks::share_solution_workers(true);
  test_hooks::set_pen({.cpu_check_off = true});
  const RunResult shared = run_benchmark(options({"a_late_thread", "b_honest"}));
  test_hooks::set_pen({});
  test_hooks::share_solution_workers(false);
  ASSERT_EQ(shared.traces.size(), 4u);
  for (int k = 0; k < 2; ++k) {
    const Trace* t = trace_of(shared, "b_honest", k);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->evaluation->status, EvaluationStatus::kRuntimeError) << t->evaluation->log;
    EXPECT_NE(t->evaluation->log.find("exited with status 3"), std::string::npos)
        << t->evaluation->log;
  }
  const RunResult own = run_benchmark(options({"a_late_thread", "b_honest"}));
  ASSERT_EQ(own.traces.size(), 4u);
  for (int k = 0; k < 2; ++k) {
    for (const char* name : {"a_late_thread", "b_honest"}) {
      const Trace* t = trace_of(own, name, k);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->evaluation->status, EvaluationStatus::kPassed) << name << t->evaluation->log;
    }
  }
}

// Computes only on the calls whose inputs the input-set file names as a trial's checked set
// ("0/..", "1/..", "2/.."): it finds the file's mapping in /proc/self/maps, reads the
// safetensors header and compares its hidden_states pointer with those tensors' addresses.
const char* kGuessesByName = R"(
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
static bool named_as_checked(const void* x) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("inputs.safetensors") == std::string::npos) continue;
    const std::uintptr_t base = std::strtoull(line.c_str(), nullptr, 16);
    const std::string path = line.substr(line.find('/'));
    std::ifstream f(path, std::ios::binary);
    std::uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string header(n, '\0');
    f.read(header.data(), static_cast<std::streamsize>(n));
    for (int k = 0; k < 3; ++k) {
      const std::string key = "\"" + std::to_string(k) + "/hidden_states\"";
      const auto at = header.find(key);
      if (at == std::string::npos) continue;
      const auto offsets = header.find("data_offsets", at);
      const auto open = header.find('[', offsets);
      const std::uintptr_t begin = std::strtoull(header.c_str() + open + 1, nullptr, 10);
      if (base + 8 + n + begin == reinterpret_cast<std::uintptr_t>(x)) return true;
    }
  }
  return false;
}
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  if (named_as_checked(x.raw().data)) rms(x, w, y);
}
FIB_EXPORT_SOLUTION(run, run_);
)";

// Computes only on the first two timed calls of each trial (after the first trial's warmup).
const char* kGuessesByIndex = R"(
static int calls = 0;
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  const int c = calls++;
  const int in_trial = c < 2 ? -1 : (c - 2) % 40;
  if (in_trial >= 0 && in_trial < 2) rms(x, w, y);
}
FIB_EXPORT_SOLUTION(run, run_);
)";

TEST_F(RunTrust, ASolutionThatComputesOnlyTheCallsItGuessesAreCheckedFails) {
  add_solution("guesses_by_name", kGuessesByName);
  add_solution("guesses_by_index", kGuessesByIndex);
  add_solution("honest", R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)");
  // 40 timed calls in each of 3 trials: a solution that computes 1 or 2 of each trial's calls
  // passes only if every trial's draw lands on one of them, (2/40)^3 ~ 1e-4 at most.
  RunOptions o = options({"guesses_by_name", "guesses_by_index", "honest"});
  o.cli.iterations = 40;
  o.cli.num_trials = 3;
  o.fixed_iterations = true;
  const RunResult r = run_benchmark(o);
  ASSERT_EQ(r.traces.size(), 6u);
  for (const Trace& t : r.traces) {
    const EvaluationStatus want =
        *t.solution == "honest" ? EvaluationStatus::kPassed : EvaluationStatus::kIncorrectNumerical;
    EXPECT_EQ(t.evaluation->status, want) << *t.solution << ": " << t.evaluation->log;
    // The drawn call was one it skipped: its outputs still hold the poison.
    if (want != EvaluationStatus::kPassed) {
      EXPECT_NE(t.evaluation->log.find("never written"), std::string::npos) << t.evaluation->log;
    }
  }
}

}  // namespace
}  // namespace fib::bench
