// What `fib run` does with records it cannot use, as a new user meets them: a name on the command
// line that matches nothing or names a record that failed to load stops the run before anything
// runs (exit 2, the file and JSON path given), unless --keep-going; a broken record the run
// would have used is reported, skipped, and the run exits 1. Also: a solution whose
// target_hardware lists the CPU among others runs on the CPU, --dataset and --local are one
// option, and an unknown command is named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

const char* const kNaive = "solutions/fib-examples/rmsnorm/rmsnorm_h2048/rmsnorm_h2048_naive.json";
const char* const kFast = "solutions/fib-examples/rmsnorm/rmsnorm_h2048/rmsnorm_h2048_fast.json";

// A dataset of rmsnorm_h2048 alone (two workloads) with two of the example's solutions.
class RunRecords : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path example = source_dir() / "examples/dataset";
    for (const char* rel : {"definitions/rmsnorm/rmsnorm_h2048.json",
                            "workloads/rmsnorm/rmsnorm_h2048.jsonl", kNaive, kFast}) {
      fs::create_directories((root() / rel).parent_path());
      fs::copy_file(example / rel, root() / rel);
    }
  }
  fs::path root() const { return dir_.path() / "dataset"; }
  // Replaces the first `from` in the dataset's file `rel`.
  void edit(const std::string& rel, const std::string& from, const std::string& to) const {
    std::string text = TempDir::read_file(root() / rel);
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << rel;
    text.replace(at, from.size(), to);
    dir_.write("dataset/" + rel, text);
  }
  CommandResult run(std::vector<std::string> extra) const {
    std::vector<std::string> args = {"run",
                                     "--dataset",
                                     root().string(),
                                     "--warmup-runs",
                                     "1",
                                     "--iterations",
                                     "3",
                                     "--num-trials",
                                     "1",
                                     "--max-trial-seconds",
                                     "0.2",
                                     "--seed",
                                     "5",
                                     "--build-cache",
                                     (dir_.path() / "cache").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_fib(args);
  }
  std::size_t traces() const { return TraceSet::load(root()).trace_count(); }

  TempDir dir_;
};

TEST(FibCommand, AnUnknownCommandIsNamedWithTheClosestOne) {
  const CommandResult r = run_fib({"rnu", "--dataset", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("fib: unknown command 'rnu' (did you mean 'run'?)"));
  EXPECT_THAT(r.err, Not(HasSubstr("A subcommand is required")));
}

// The completion script offers the subcommands and flags of the words typed so far.
TEST(FibCommand, BashCompletionOffersTheCommandsAndFlagsOfWhatIsTyped) {
  const CommandResult script = run_fib({"completion", "bash"});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  TempDir dir;
  const fs::path file = dir.write("fib.bash", script.out);
  const auto complete = [&](const std::string& words, int cword) {
    const std::string cmd = fmt::format(
        "bash -c 'source {}; COMP_WORDS=({}); COMP_CWORD={}; _fib; echo \"${{COMPREPLY[*]}}\"'",
        file.string(), words, cword);
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    while (p && std::fgets(buf, sizeof buf, p)) out += buf;
    if (p) ::pclose(p);
    return out;
  };
  EXPECT_EQ(complete("fib report fa", 2), "fast-p\n");
  EXPECT_EQ(complete("fib run --dataset d --keep", 4), "--keep-going\n");
  EXPECT_EQ(complete("fib tra", 1), "trace\n");
  const CommandResult zsh = run_fib({"completion", "zsh"});
  EXPECT_THAT(zsh.out, HasSubstr("bashcompinit"));
}

TEST_F(RunRecords, AMisspelledDefinitionStopsTheRunBeforeAnythingRuns) {
  const CommandResult r = run({"--definitions", "rmsnorm_h2049"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("--definitions: error: no definition named 'rmsnorm_h2049' (did "
                               "you mean 'rmsnorm_h2048'?)"));
  EXPECT_EQ(traces(), 0u);
  const CommandResult kept = run({"--definitions", "rmsnorm_h2049", "--keep-going"});
  EXPECT_EQ(kept.exit_code, 0) << kept.out << kept.err;
  EXPECT_THAT(kept.err, HasSubstr("warning: --definitions: error: no definition named"));
}

TEST_F(RunRecords, ANamedSolutionThatFailedToLoadStopsTheRunWithItsFileAndField) {
  edit(kNaive, R"("language": "cpp")", R"("language": "fortran")");
  const CommandResult r = run({"--solutions", "rmsnorm_h2048_naive"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr(std::string(kNaive) + ": $.spec.language: error: solution "
                                                     "'rmsnorm_h2048_naive' (named by "
                                                     "--solutions) failed to load: "));
  EXPECT_THAT(r.err, Not(HasSubstr("no solution named")));
  EXPECT_EQ(traces(), 0u);
}

TEST_F(RunRecords, ANamedDefinitionThatFailedToLoadStopsTheRunWithItsFileAndField) {
  edit("definitions/rmsnorm/rmsnorm_h2048.json", R"("dtype": "bfloat16")",
       R"("dtype": "bfloat17")");
  const CommandResult r = run({"--definitions", "rmsnorm_h2048"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("fib: definitions/rmsnorm/rmsnorm_h2048.json: "
                               "$.inputs.hidden_states.dtype: error: definition 'rmsnorm_h2048' "
                               "(named by --definitions) failed to load: unknown dtype "
                               "'bfloat17' (did you mean 'bfloat16'?)\n"));
  EXPECT_THAT(r.err, Not(HasSubstr("no definition named")));
}

TEST_F(RunRecords, ABrokenRecordNotNamedIsReportedSkippedAndTheRunExitsOne) {
  edit(kNaive, R"("language": "cpp")", R"("language": "fortran")");
  const CommandResult r = run({"--definitions", "rmsnorm_h2048"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: skipped a record that failed to load: " +
                               std::string(kNaive) + ": $.spec.language: error: "));
  EXPECT_THAT(r.out, HasSubstr("1 record(s) the run would have used failed to load"));
  // The other solution ran on both workloads.
  EXPECT_EQ(TraceSet::load(root()).traces_of_solution("rmsnorm_h2048_fast").size(), 2u);
  // Outside the selection it changes nothing.
  const CommandResult other = run({"--solutions", "rmsnorm_h2048_fast", "--no-save-results"});
  EXPECT_EQ(other.exit_code, 0) << other.out << other.err;
  EXPECT_THAT(other.err, Not(HasSubstr("failed to load")));
}

TEST_F(RunRecords, APortableSolutionRunsOnTheCpuAndLocalIsAnAliasOfDataset) {
  edit(kNaive, R"("cpu"
    ])",
       R"("cpu",
      "cuda"
    ])");
  std::vector<std::string> args = {"--solutions", "rmsnorm_h2048_naive"};
  CommandResult r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("skipping solution")));
  const TraceSet set = TraceSet::load(root());
  const auto naive = set.traces_of_solution("rmsnorm_h2048_naive");
  ASSERT_EQ(naive.size(), 2u);
#ifdef FIB_TVM_FFI_INCLUDE_DIR
  for (const Trace* t : naive) EXPECT_EQ(t->evaluation->status, EvaluationStatus::kPassed);
#endif
  // Without --resume the summary says nothing of it.
  EXPECT_THAT(r.out, Not(HasSubstr("skipped by --resume")));
  // `fib trace show` narrows to one trace, or lists the candidates.
  CommandResult shown = run_fib({"trace", "show", "--local", root().string(), "--definition",
                                 "rmsnorm_h2048", "--solution", "rmsnorm_h2048_naive"});
  EXPECT_EQ(shown.exit_code, 2);
  EXPECT_THAT(shown.err, HasSubstr("fib trace show: 2 traces match; name one with --solution"));
  EXPECT_THAT(shown.err, HasSubstr("rmsnorm_h2048_naive  workload 055ba258-f953-4e5c-bc34-"));
  shown = run_fib({"trace", "show", "--dataset", root().string(), "--definition", "rmsnorm_h2048",
                   "--solution", "rmsnorm_h2048_naive", "--workload", "055ba258"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("definition rmsnorm_h2048\nsolution   rmsnorm_h2048_naive\n"
                                   "workload   055ba258-f953-4e5c-bc34-1290cd76979e\n"));
#ifdef FIB_TVM_FFI_INCLUDE_DIR
  EXPECT_THAT(shown.out, HasSubstr("status     PASSED\n"));
  EXPECT_THAT(shown.out, HasSubstr("latency    "));
#endif
  // --local is upstream's spelling of --dataset; with --resume both workloads are done.
  r = run_fib({"run", "--local", root().string(), "--solutions", "rmsnorm_h2048_naive", "--resume",
               "--build-cache", (dir_.path() / "cache").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("0 evaluations (2 already done, skipped by --resume)"));
}

// On a terminal the progress line is live: what a lane does now (a build, a reference run, an
// evaluation) with its elapsed time, and the ETA; in a log, one plain line per evaluation.
TEST_F(RunRecords, OnATerminalTheProgressLineSaysWhatRunsNow) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "SKIPPED: no `script` (util-linux) to give fib a terminal";
  }
  const fs::path typescript = dir_.path() / "typescript";
  const std::string cmd = fmt::format(
      "FIB_HOME={} script -qec \"{} run --dataset {} --solutions rmsnorm_h2048_naive,"
      "rmsnorm_h2048_fast --warmup-runs 1 --iterations 3 --num-trials 1 --build-cache {} "
      "--no-save-results\" {} >/dev/null 2>&1",
      (dir_.path() / "home").string(), FIB_EXE, root().string(), (dir_.path() / "cache").string(),
      typescript.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string tty = TempDir::read_file(typescript);
  EXPECT_THAT(tty, HasSubstr("\033[K[                            ] 0/4 ETA ?  building "));
  EXPECT_THAT(tty, HasSubstr("reference on rmsnorm_h2048 workload 055ba258 (0:0"));
  EXPECT_THAT(tty, HasSubstr("evaluating rmsnorm_h2048_naive on 3eb5f652 (0:0"));
  EXPECT_THAT(tty, HasSubstr("] 4/4 ETA 0:00  rmsnorm_h2048 · "));
  const CommandResult log = run({"--solutions", "rmsnorm_h2048_fast", "--no-save-results"});
  EXPECT_THAT(log.err, Not(HasSubstr("\033[K")));
  EXPECT_THAT(log.err, HasSubstr("[1/2] rmsnorm_h2048 rmsnorm_h2048_fast workload 055ba258: "));
}

}  // namespace
}  // namespace fib::testing
