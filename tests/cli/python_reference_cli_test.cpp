// End to end: the PyTorch reference fallback of `fib run` (--reference native|python|auto) on the
// bundled example, and `fib reference check` on the example and, where it is present, the shared
// corpus. Tests that need a python3 with torch skip visibly without one (CI has Debian's
// python3-torch).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "reference/python_reference.h"
#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

constexpr const char* kActivation = "silu_and_mul_h16384";

// A scratch copy of the example dataset and the flags of a short run on it.
struct ExampleRun {
  TempDir dir;
  fs::path root = dir.path() / "dataset";
  ExampleRun() { copy_tree(source_dir() / "examples/dataset", root); }
  // Spells silu_and_mul_h16384's silu out as g * sigmoid(g): the same math, which fib's native
  // activation reference does not read, so that only its PyTorch reference can check it.
  void spell_out_silu() const {
    const fs::path file = root / "definitions/activation/silu_and_mul_h16384.json";
    std::string text = TempDir::read_file(file);
    const std::string silu = "F.silu(x[..., :d])";
    const auto at = text.find(silu);
    if (at == std::string::npos) throw std::runtime_error("no F.silu call in " + file.string());
    text.replace(at, silu.size(), "x[..., :d] * torch.sigmoid(x[..., :d])");
    std::ofstream(file) << text;
  }
  std::vector<std::string> args(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"run",
                                  "--local",
                                  root.string(),
                                  "--warmup-runs",
                                  "1",
                                  "--iterations",
                                  "3",
                                  "--num-trials",
                                  "2",
                                  "--timeout",
                                  "30",
                                  "--max-trial-seconds",
                                  "0.2",
                                  "--seed",
                                  "7",
                                  "--build-cache",
                                  (dir.path() / "cache").string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  // Every written trace of `definition`, in file order.
  std::vector<Trace> traces(const std::string& definition) const {
    const TraceSet set = TraceSet::load(root);
    std::vector<Trace> out;
    for (const auto& t : set.traces(definition)) {
      if (!t.value.is_workload_trace()) out.push_back(t.value);
    }
    return out;
  }
};

std::map<std::string, std::vector<std::string>> statuses(const std::vector<Trace>& traces) {
  std::map<std::string, std::vector<std::string>> out;
  for (const Trace& t : traces) {
    out[t.solution.value_or("?")].push_back(std::string(status_name(t.evaluation->status)));
  }
  return out;
}

TEST(PythonReferenceRun, ADefinitionWithoutANativeReferenceIsCheckedAgainstItsPyTorchCode) {
  FIB_REQUIRE_TORCH(python);
  ExampleRun e;
  e.spell_out_silu();
  const CommandResult r = run_fib(e.args({"--definitions", kActivation}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("silu_and_mul_h16384 (reference: the definition's PyTorch code)"));
  EXPECT_THAT(r.out, HasSubstr("a PyTorch reference's latency is Python's wall clock"));
  const std::vector<Trace> traces = e.traces(kActivation);
  ASSERT_EQ(traces.size(), 2u);
  for (const Trace& t : traces) {
    const Evaluation& ev = *t.evaluation;
    EXPECT_EQ(ev.status, EvaluationStatus::kPassed) << ev.log;
    EXPECT_THAT(ev.log, HasSubstr("passed 2 checked calls"));
    EXPECT_THAT(ev.log, HasSubstr("against python"));
    const Json& extra = ev.environment.extra;
    EXPECT_EQ(extra.at("reference"), "python");
    EXPECT_EQ(extra.at("reference_runtime").at("torch"), torch_version(python));
    EXPECT_EQ(extra.at("reference_runtime").at("device"), "cpu");
    const auto torch_lib = std::find_if(ev.environment.libs.begin(), ev.environment.libs.end(),
                                        [](const auto& l) { return l.first == "torch"; });
    ASSERT_NE(torch_lib, ev.environment.libs.end());
    EXPECT_EQ(torch_lib->second, torch_version(python));
    // The PyTorch reference was timed: up to 10 calls per trial, two trials.
    ASSERT_TRUE(ev.performance.has_value());
    EXPECT_GT(ev.performance->reference_latency_ms, 0.0);
    EXPECT_GT(ev.performance->speedup_factor, 0.0);
    EXPECT_EQ(ev.performance->extra.at("reference").at("trial_medians_ms").size(), 2u);
  }
  const CommandResult v = run_fib({"validate", "--dataset", e.root.string()});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

TEST(PythonReferenceRun, NativeOnlyLeavesOutADefinitionWithoutOneAndSaysWhy) {
  ExampleRun e;
  e.spell_out_silu();
  const CommandResult r = run_fib(e.args({"--definitions", kActivation, "--reference", "native"}));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: silu_and_mul_h16384 has no native reference (no native "
                               "reference fits: activation: the reference names no activation it "
                               "knows"));
  EXPECT_THAT(r.err, HasSubstr("its solutions are not evaluated (--reference native"));
  EXPECT_TRUE(e.traces(kActivation).empty());
}

TEST(PythonReferenceRun, AMissingInterpreterIsNamed) {
  ExampleRun e;
  e.spell_out_silu();
  const CommandResult r = run_fib(e.args(
      {"--definitions", kActivation, "--python", (e.dir.path() / "no-such-python").string()}));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("its PyTorch reference cannot check it (--python names"));
  EXPECT_THAT(r.err, HasSubstr("no-such-python', which is not an executable"));
  EXPECT_TRUE(e.traces(kActivation).empty());
}

TEST(PythonReferenceRun, AnUnknownReferenceChoiceIsRefused) {
  ExampleRun e;
  const CommandResult r = run_fib(e.args({"--reference", "pytorch"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown reference 'pytorch'"));
  EXPECT_THAT(r.err, HasSubstr("expected native, python or auto"));
}

// The same solutions judged against the native reference and against the PyTorch one earn the
// same statuses; the traces name which reference judged them.
TEST(PythonReferenceRun, PythonAndNativeReferencesGiveTheSameVerdicts) {
  FIB_REQUIRE_TORCH(python);
  std::map<std::string, std::map<std::string, std::vector<std::string>>> by_reference;
  for (const std::string reference : {"native", "python"}) {
    ExampleRun e;
    const CommandResult r =
        run_fib(e.args({"--definitions", "rmsnorm_h2048", "--solutions", "rmsnorm_h2048_naive",
                        "--solutions", "rmsnorm_h2048_wrong_result", "--solutions",
                        "rmsnorm_h2048_writes_nothing", "--reference", reference}));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::vector<Trace> traces = e.traces("rmsnorm_h2048");
    ASSERT_EQ(traces.size(), 6u);
    for (const Trace& t : traces) {
      EXPECT_EQ(t.evaluation->environment.extra.at("reference"),
                reference == "native" ? "native:rmsnorm" : "python");
    }
    by_reference[reference] = statuses(traces);
  }
  EXPECT_EQ(by_reference["native"], by_reference["python"]);
  EXPECT_EQ(by_reference["python"]["rmsnorm_h2048_naive"],
            (std::vector<std::string>{"PASSED", "PASSED"}));
  EXPECT_EQ(by_reference["python"]["rmsnorm_h2048_wrong_result"],
            (std::vector<std::string>{"INCORRECT_NUMERICAL", "INCORRECT_NUMERICAL"}));
}

// ---- fib reference check ----------------------------------------------------------------------

std::vector<std::string> check(const fs::path& root, std::vector<std::string> extra) {
  std::vector<std::string> a = {"reference", "check", "--local", root.string(), "--seed", "3"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(ReferenceCheck, TheExampleDefinitionsAgree) {
  FIB_REQUIRE_TORCH(python);
  const fs::path root = source_dir() / "examples/dataset";
  const CommandResult r = run_fib(check(root, {"--op-type", "rmsnorm", "--definition",
                                               "gemm_n2048_k2048", "--definition", kActivation}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("definition"));
  EXPECT_THAT(r.out, HasSubstr("max abs err"));
  for (const char* def :
       {"rmsnorm_h2048", "fused_add_rmsnorm_h2048", "gemm_n2048_k2048", "silu_and_mul_h16384"}) {
    EXPECT_THAT(r.out, ::testing::ContainsRegex(std::string(def) + " +[a-z]+ +2 .* agree"));
  }
  EXPECT_THAT(r.out, HasSubstr("4 definitions: 4 agree, 0 DISAGREE, 0 ERROR, 0 skipped"));
}

TEST(ReferenceCheck, AReferenceThatComputesSomethingElseDisagrees) {
  FIB_REQUIRE_TORCH(python);
  TempDir dir;
  const fs::path root = dir.path() / "dataset";
  copy_tree(source_dir() / "examples/dataset", root);
  // The PyTorch reference forgets the weight; the native one does not.
  const fs::path file = root / "definitions/rmsnorm/rmsnorm_h2048.json";
  std::string text = TempDir::read_file(file);
  const std::string weight = " * weight.to(torch.float32)";
  ASSERT_NE(text.find(weight), std::string::npos);
  text.replace(text.find(weight), weight.size(), "");
  dir.write("dataset/definitions/rmsnorm/rmsnorm_h2048.json", text);
  const CommandResult r = run_fib(check(root, {"--definition", "rmsnorm_h2048", "--json"}));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_FALSE(j.at("all_agree").get<bool>());
  ASSERT_EQ(j.at("rows").size(), 1u);
  const Json& row = j.at("rows")[0];
  EXPECT_EQ(row.at("verdict"), "DISAGREE");
  EXPECT_EQ(row.at("workloads"), 2);
  EXPECT_EQ(row.at("disagreeing"), 2);
  EXPECT_THAT(row.at("reason").get<std::string>(), HasSubstr("INCORRECT_NUMERICAL"));
  EXPECT_GT(row.at("max_abs_error").get<double>(), 0.1);
}

TEST(ReferenceCheck, NothingChosenIsAUsageError) {
  const CommandResult r = run_fib(check(source_dir() / "examples/dataset", {}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--definition NAME (repeatable), --op-type T or --all"));
  const CommandResult op = run_fib(check(source_dir() / "examples/dataset", {"--op-type", "gem"}));
  EXPECT_EQ(op.exit_code, 2);
  EXPECT_THAT(op.err, HasSubstr("no definition of op type 'gem'"));
}

TEST(ReferenceCheck, TheReferenceCommandStillNeedsItsFlags) {
  const CommandResult r =
      run_fib({"reference", "--dataset", (source_dir() / "examples/dataset").string(),
               "--definition", "rmsnorm_h2048"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--inputs is required"));
}

// Corpus definitions of op types whose workloads the corpus has and has not (rope: synthesized).
TEST(ReferenceCheck, CorpusDefinitionsOfTwoOpTypesAgree) {
  FIB_REQUIRE_TORCH(python);
  FIB_REQUIRE_CORPUS(corpus);
  const CommandResult r = run_fib(check(
      corpus, {"--op-type", "rmsnorm", "--op-type", "rope", "--max-workloads", "1", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Json j = Json::parse(r.out);
  int rope = 0, rmsnorm = 0;
  for (const Json& row : j.at("rows")) {
    EXPECT_EQ(row.at("verdict"), "agree") << row.dump();
    EXPECT_EQ(row.at("workloads"), 1) << row.dump();
    if (row.at("op_type") == "rope") {
      ++rope;
      EXPECT_EQ(row.at("synthesized"), 1) << "the corpus has no rope workloads";
    } else {
      ++rmsnorm;
    }
  }
  EXPECT_GE(rope, 1);
  EXPECT_GE(rmsnorm, 1);
}

}  // namespace
}  // namespace fib::testing
