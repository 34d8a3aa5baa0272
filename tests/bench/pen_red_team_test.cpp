// The red team of "no pen after the calls" (issue #37 point 1) on the CPU: solutions whose
// timed calls compute nothing and that try to decide their verdict afterwards, through what fib
// reads once the calls are over. Each attack is shown to work with its protection switched off
// (fib/bench/run/test_hooks.h's PenSwitches, which only tests reach) and to fail with it on,
// the run going on and every other solution judged as before:
//   (a) a thread watching the box's out/ folder rewrites the drawn call's file with outputs it
//       computes for that call alone;
//   (b) it replaces that file with a link to the reference's outputs in fib's scratch folder;
//   (c) it replaces it with a dangling link (which made `fib run` fail as a whole);
//   (d) a thread keeps a mapping of the output arena and fills every call's slot after the
//       calls are over.
// And the checked call is drawn by the orchestrator, uniformly over the calls a trial made.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "bench/run/output_arena.h"
#include "fib/base/diagnostics.h"
#include "fib/bench/launch/worker_process.h"
#include "fib/bench/run/run.h"
#include "fib/bench/run/test_hooks.h"
#include "fib/dataset/trace_set.h"
#include "support/rmsnorm_solution_source.h"
#include "support/temp_dir.h"

namespace fib::bench {
namespace {

namespace fs = std::filesystem;
using test_hooks::PenSwitches;
using test_hooks::set_pen;
using testing::TempDir;

const fs::path kSource = FIB_SOURCE_DIR;

// What every attack below shares: each call records its inputs and marks its output with its
// own number (y[0] = the call's index; the rest of the output stays fib's poison), computing
// nothing; the_box() finds the folder of the mapped input-set file; set_of(x) the input set
// whose hidden_states `x` points at, from the file's header.
const char* kRecorder = R"(
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
struct Call { const std::uint16_t* x; const std::uint16_t* w; long rows, n; };
static std::mutex g_mu;
static std::vector<Call> g_calls;
static std::chrono::steady_clock::time_point g_last_call;
static std::string inputs_file() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("inputs.safetensors") != std::string::npos) return line.substr(line.find('/'));
  }
  return {};
}
static std::string the_box() {
  const std::string f = inputs_file();
  return f.substr(0, f.rfind('/'));
}
static std::string header_of(const std::string& path, std::uint64_t* n) {
  std::ifstream f(path, std::ios::binary);
  *n = 0;
  f.read(reinterpret_cast<char*>(n), 8);
  if (!f || *n == 0 || *n > (1u << 24)) return {};
  std::string header(*n, '\0');
  f.read(header.data(), static_cast<std::streamsize>(*n));
  return f ? header : std::string();
}
// The offset of the first tensor's data in a safetensors file (one output: rmsnorm's).
static long data_offset(const std::string& path) {
  std::uint64_t n = 0;
  const std::string header = header_of(path, &n);
  const auto at = header.find("data_offsets");
  if (at == std::string::npos) return -1;
  return static_cast<long>(8 + n + std::strtoull(header.c_str() + header.find('[', at) + 1, nullptr, 10));
}
static int set_of(const void* x) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("inputs.safetensors") == std::string::npos) continue;
    const std::uintptr_t base = std::strtoull(line.c_str(), nullptr, 16);
    std::uint64_t n = 0;
    const std::string header = header_of(line.substr(line.find('/')), &n);
    for (int k = 0; k < 4096; ++k) {
      const auto at = header.find("\"" + std::to_string(k) + "/hidden_states\"");
      if (at == std::string::npos) continue;
      const auto open = header.find('[', header.find("data_offsets", at));
      if (base + 8 + n + std::strtoull(header.c_str() + open + 1, nullptr, 10) ==
          reinterpret_cast<std::uintptr_t>(x)) return k;
    }
  }
  return -1;
}
static void attack_file(const std::string& path, const Call& c);
// Watches out/ (or, unsandboxed, the folder of the checked files) for the files of checked calls
// and attacks each once, knowing its call from the mark in its first element.
static void watch() {
  std::set<std::string> done;
  for (;;) {
    std::string dir = the_box() + "/out";
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) dir = the_box();
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.find("-trial") == std::string::npos || name.find("reference") == 0) continue;
        const std::string path = dir + "/" + name;
        const long at = data_offset(path);
        if (at < 0 || done.count(path) > 0) continue;
        std::uint16_t mark = 0;
        const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW);
        if (fd < 0) continue;
        const bool read = pread(fd, &mark, 2, at) == 2;
        close(fd);
        std::lock_guard<std::mutex> lock(g_mu);
        if (!read || mark >= g_calls.size()) continue;
        done.insert(path);
        attack_file(path, g_calls[mark]);
      }
      closedir(d);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}
static void record(fib::TensorView x, fib::TensorView w, fib::TensorView y, bool watcher) {
  std::lock_guard<std::mutex> lock(g_mu);
  static bool started = false;
  if (watcher && !started) {
    started = true;
    std::thread(watch).detach();
  }
  y.data_ptr<std::uint16_t>()[0] = static_cast<std::uint16_t>(g_calls.size());
  g_calls.push_back({x.data_ptr<const std::uint16_t>(), w.data_ptr<const std::uint16_t>(),
                     x.size(0), x.size(1)});
  g_last_call = std::chrono::steady_clock::now();
}
)";

// (a) Rewrites the drawn call's file in place with the outputs of that call alone.
const char* kRewritesTheDrawnFile = R"(
static void attack_file(const std::string& path, const Call& c) {
  std::vector<std::uint16_t> y(static_cast<std::size_t>(c.rows * c.n));
  rms(c.x, c.w, y.data(), c.rows, c.n);
  const int fd = open(path.c_str(), O_WRONLY | O_NOFOLLOW);
  if (fd < 0) return;
  (void)!pwrite(fd, y.data(), y.size() * 2, data_offset(path));
  close(fd);
}
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { record(x, w, y, true); }
FIB_EXPORT_SOLUTION(run, run_);
)";

// (b) Replaces it with a link to the reference's outputs on the call's input set, in the
// scratch folder above the box (its only workload's folder, work/w0).
const char* kLinksToTheReference = R"(
static void attack_file(const std::string& path, const Call& c) {
  const std::string box = the_box();
  const std::string scratch = box.substr(0, box.rfind('/'));
  const std::string target = scratch + "/work/w0/reference-set" + std::to_string(set_of(c.x)) + ".safetensors";
  unlink(path.c_str());
  (void)!symlink(target.c_str(), path.c_str());
}
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { record(x, w, y, true); }
FIB_EXPORT_SOLUTION(run, run_);
)";

// (c) Replaces it with a link to nothing.
const char* kDanglingLink = R"(
static void attack_file(const std::string& path, const Call&) {
  unlink(path.c_str());
  (void)!symlink("/nonexistent/fib-pen-red-team", path.c_str());
}
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { record(x, w, y, true); }
FIB_EXPORT_SOLUTION(run, run_);
)";

// (d) Keeps a mapping of its own of the output arena (mremap with old size 0 maps the same
// shared pages again, so it outlives the worker's), and once no call has come for 1.5 s, fills
// every timed call's slot with that call's correct outputs. The schedule has fixed iterations:
// the evaluation's first 2 calls are its warmup, then timed call j's outputs go to slot j.
const char* kFillsTheArenaAfterTheCalls = R"(
static void attack_file(const std::string&, const Call&) {}
static std::uint16_t* g_arena = nullptr;
static void keep_the_arena() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("fib-output-arena") == std::string::npos) continue;
    char* end = nullptr;
    const std::uintptr_t begin = std::strtoull(line.c_str(), &end, 16);
    const std::uintptr_t stop = std::strtoull(end + 1, nullptr, 16);
    void* p = mremap(reinterpret_cast<void*>(begin), 0, stop - begin, MREMAP_MAYMOVE);
    if (p != MAP_FAILED) g_arena = static_cast<std::uint16_t*>(p);
    return;
  }
}
static void fill_later() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_arena == nullptr || std::chrono::steady_clock::now() - g_last_call < std::chrono::milliseconds(1500)) continue;
    for (std::size_t j = 2; j < g_calls.size(); ++j) {
      const Call& c = g_calls[j];
      const std::size_t slot = ((static_cast<std::size_t>(c.rows * c.n) * 2 + 63) / 64 * 64) / 2;
      rms(c.x, c.w, g_arena + (j - 2) * slot, c.rows, c.n);
    }
    g_arena = nullptr;
    return;
  }
}
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_calls.empty()) {
      keep_the_arena();
      std::thread(fill_later).detach();
    }
  }
  record(x, w, y, false);
}
FIB_EXPORT_SOLUTION(run, run_);
)";

const char* kHonest = R"(
static void run_(fib::TensorView x, fib::TensorView w, fib::TensorView y) { rms(x, w, y); }
FIB_EXPORT_SOLUTION(run, run_);
)";

class PenRedTeam : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::copy_tree(kSource / "examples" / "dataset", tmp_.path() / "dataset");
    set_pen(PenSwitches{});
  }
  void TearDown() override { set_pen(PenSwitches{}); }
  void add_solution(const std::string& name, const std::string& attack) {
    Solution s;
    s.name = name;
    s.definition = "rmsnorm_h2048";
    s.author = "pen";
    s.spec.language = "cpp";
    s.spec.binding = "fib";
    s.spec.target_hardware = {"cpu"};
    s.spec.entry_point = "kernel.cpp::run";
    s.sources.push_back(SourceFile{
        "kernel.cpp", std::string(testing::kRmsnormSolutionSource) + kRecorder + attack, {}});
    if (attack == kHonest) {
      s.sources.back().content = std::string(testing::kRmsnormSolutionSource) + kHonest;
    }
    write_solution(tmp_.path() / "dataset", s, "rmsnorm");
  }
  // One workload (its scratch folder is w0), two trials of six timed calls each, sandboxed.
  RunOptions options(std::vector<std::string> solutions) const {
    RunOptions o;
    o.dataset = tmp_.path() / "dataset";
    o.worker_executable = FIB_EXE;
    o.abi_include_dir = kSource / "include";
    o.build_cache = tmp_.path() / "cache";
    o.seed = 5;
    o.timeout_seconds = 60;
    o.cli.warmup_runs = 2;
    o.cli.iterations = 6;
    o.cli.num_trials = 2;
    o.fixed_iterations = true;
    o.definitions = {"rmsnorm_h2048"};
    o.workloads = {"055ba258-f953-4e5c-bc34-1290cd76979e"};
    o.solutions = std::move(solutions);
    o.sandbox = SandboxMode::kRequired;
    return o;
  }
  static const Trace& trace_of(const RunResult& r, const std::string& solution) {
    for (const Trace& t : r.traces) {
      if (*t.solution == solution) return t;
    }
    throw Error(solution, "no trace");
  }
  static EvaluationStatus status_of(const RunResult& r, const std::string& solution) {
    return trace_of(r, solution).evaluation->status;
  }
  TempDir tmp_;
};

#define SKIP_WITHOUT_SANDBOX()                                                            \
  if (find_bwrap().empty()) {                                                             \
    GTEST_SKIP() << "bubblewrap is not installed (scripts/install-deps.sh installs it); " \
                    "the box's red team needs the sandbox";                               \
  }

// The old pen: the worker draws and writes the drawn call's outputs to its out/ folder, which
// fib reads a moment after the reply.
PenSwitches worker_drawn_files() {
  PenSwitches off;
  off.worker_draws_checked_calls = true;
  off.read_delay_ms = 500;
  off.cpu_check_off = true;
  return off;
}

TEST_F(PenRedTeam, AWatcherRewritingTheDrawnCallsFileFails) {
  SKIP_WITHOUT_SANDBOX();
  add_solution("rewrites_the_drawn_file", kRewritesTheDrawnFile);
  set_pen(worker_drawn_files());
  const RunResult off = run_benchmark(options({"rewrites_the_drawn_file"}));
  EXPECT_EQ(status_of(off, "rewrites_the_drawn_file"), EvaluationStatus::kPassed)
      << trace_of(off, "rewrites_the_drawn_file").evaluation->log;

  set_pen(PenSwitches{});
  const RunResult on = run_benchmark(options({"rewrites_the_drawn_file"}));
  const Trace& t = trace_of(on, "rewrites_the_drawn_file");
  EXPECT_EQ(t.evaluation->status, EvaluationStatus::kIncorrectNumerical) << t.evaluation->log;
  EXPECT_EQ(t.evaluation->environment.extra["checked_calls"]["drawn_by"], "orchestrator");
}

TEST_F(PenRedTeam, ALinkToTheReferencesOutputsFails) {
  SKIP_WITHOUT_SANDBOX();
  add_solution("links_to_the_reference", kLinksToTheReference);
  PenSwitches off = worker_drawn_files();
  off.follow_links_out_of_the_box = true;
  off.box_at_its_real_path = true;
  set_pen(off);
  const RunResult r_off = run_benchmark(options({"links_to_the_reference"}));
  EXPECT_EQ(status_of(r_off, "links_to_the_reference"), EvaluationStatus::kPassed)
      << trace_of(r_off, "links_to_the_reference").evaluation->log;

  set_pen(PenSwitches{});
  const RunResult on = run_benchmark(options({"links_to_the_reference"}));
  const Trace& t = trace_of(on, "links_to_the_reference");
  EXPECT_EQ(t.evaluation->status, EvaluationStatus::kIncorrectNumerical) << t.evaluation->log;
}

TEST_F(PenRedTeam, ADanglingLinkFailsItsEvaluationAndTheRunGoesOn) {
  SKIP_WITHOUT_SANDBOX();
  add_solution("a_dangling_link", kDanglingLink);
  add_solution("b_honest", kHonest);
  const RunOptions o = options({"a_dangling_link", "b_honest"});
  // Off: fib follows the link, cannot read it, and the whole run ends.
  PenSwitches off = worker_drawn_files();
  off.follow_links_out_of_the_box = true;
  set_pen(off);
  EXPECT_THROW(run_benchmark(o), Error);

  // The worker's files held to regular files with one link: that evaluation fails, named.
  set_pen(worker_drawn_files());
  const RunResult files = run_benchmark(o);
  // Where the watcher replaced the file in time, the evaluation fails naming the link; where the
  // worker's tree stopped first, the file is the calls' own (they computed nothing). Either way
  // the link is never followed and the run goes on.
  const Trace& linked = trace_of(files, "a_dangling_link");
  const Evaluation& e = *linked.evaluation;
  if (e.status == EvaluationStatus::kRuntimeError) {
    EXPECT_NE(e.log.find("is a symbolic link: fib does not read it"), std::string::npos) << e.log;
  } else {
    EXPECT_EQ(e.status, EvaluationStatus::kIncorrectNumerical) << e.log;
  }
  EXPECT_EQ(status_of(files, "b_honest"), EvaluationStatus::kPassed);

  // Every protection on: there is no file to replace; the calls computed nothing.
  set_pen(PenSwitches{});
  const RunResult on = run_benchmark(o);
  EXPECT_EQ(status_of(on, "a_dangling_link"), EvaluationStatus::kIncorrectNumerical);
  EXPECT_EQ(status_of(on, "b_honest"), EvaluationStatus::kPassed);
}

TEST_F(PenRedTeam, AThreadFillingTheArenaAfterTheCallsFails) {
  SKIP_WITHOUT_SANDBOX();
  add_solution("fills_the_arena_later", kFillsTheArenaAfterTheCalls);
  PenSwitches off;
  off.read_without_stopping = true;
  off.read_delay_ms = 3000;
  off.cpu_check_off = true;
  set_pen(off);
  const RunResult r_off = run_benchmark(options({"fills_the_arena_later"}));
  EXPECT_EQ(status_of(r_off, "fills_the_arena_later"), EvaluationStatus::kPassed)
      << trace_of(r_off, "fills_the_arena_later").evaluation->log;

  set_pen(PenSwitches{});
  const RunResult on = run_benchmark(options({"fills_the_arena_later"}));
  const Trace& t = trace_of(on, "fills_the_arena_later");
  EXPECT_EQ(t.evaluation->status, EvaluationStatus::kIncorrectNumerical) << t.evaluation->log;
  EXPECT_NE(t.evaluation->log.find("never written"), std::string::npos) << t.evaluation->log;
}

TEST(PenDraw, TheCheckedCallIsDrawnUniformlyByTheOrchestrator) {
  // 60000 draws over 6 positions: each count within 5% of 10000 (about 4.5 standard
  // deviations; a draw biased towards any position by 5% fails).
  std::array<int, 6> counts{};
  for (int i = 0; i < 60000; ++i) ++counts.at(detail::draw_checked_position(counts.size()));
  for (int c : counts) {
    EXPECT_GT(c, 9500);
    EXPECT_LT(c, 10500);
  }
  EXPECT_THROW(detail::draw_checked_position(0), Error);
}

TEST_F(PenRedTeam, TheDrawComesFromTheOrchestratorAndCoversEveryTimedCall) {
  // An honest solution over 8 trials: the trace records positions the orchestrator drew, each
  // among the trial's timed calls, and not all the same.
  add_solution("honest", kHonest);
  RunOptions o = options({"honest"});
  o.cli.num_trials = 8;
  o.sandbox = SandboxMode::kAuto;
  const RunResult r = run_benchmark(o);
  const Trace& t = trace_of(r, "honest");
  ASSERT_EQ(t.evaluation->status, EvaluationStatus::kPassed) << t.evaluation->log;
  const Json& drawn = t.evaluation->environment.extra["checked_calls"];
  EXPECT_EQ(drawn["drawn_by"], "orchestrator");
  ASSERT_EQ(drawn["positions"].size(), 8u);
  std::set<int> seen;
  for (const Json& p : drawn["positions"]) {
    EXPECT_GE(p.get<int>(), 0);
    EXPECT_LT(p.get<int>(), 6);
    seen.insert(p.get<int>());
  }
  EXPECT_GT(seen.size(), 1u);  // all alike: (1/6)^7 ~ 4e-6
}

}  // namespace
}  // namespace fib::bench
