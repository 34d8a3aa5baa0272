// The web interface's JSON (serve/site_api.h) over the bundled example dataset with traces
// added in memory: the leaderboard is the report module's output, kernels, traces and models
// say what the dataset holds, and unknown names are errors.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "fib/base/diagnostics.h"
#include "fib/report/fast_p.h"
#include "fib/report/summary.h"
#include "serve/site_api.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::serve {
namespace {

Trace evaluation_of(const Record<Trace>& workload, const std::string& solution,
                    EvaluationStatus status, double latency_ms) {
  Trace t;
  t.definition = workload.value.definition;
  t.workload = workload.value.workload;
  t.solution = solution;
  Evaluation e;
  e.status = status;
  e.environment.hardware = "test-cpu";
  if (status == EvaluationStatus::kPassed) {
    Performance p;
    p.latency_ms = latency_ms;
    p.reference_latency_ms = 2 * latency_ms;
    p.speedup_factor = 2;
    e.performance = p;
  }
  t.evaluation = e;
  return t;
}

// The example dataset, with author "baseline" played by the naive RMSNorm's author and traces
// of three solutions on both rmsnorm_h2048 workloads (in memory), and a definition tagged with
// a model fib does not bundle (on disk: onboarding reads where each definition is stored).
std::shared_ptr<const TraceSet> dataset() {
  static const fib::testing::TempDir dir;
  const auto root = dir.path() / "dataset";
  if (!std::filesystem::exists(root)) {
    fib::testing::copy_tree(fib::testing::source_dir() / "examples" / "dataset", root);
    Definition custom = *TraceSet::load(root).definition("gemm_n2048_k2048");
    custom.name = "gemm_custom_model_kernel";
    custom.tags = {"model:my-own-model"};
    write_definition(root, custom);
  }
  auto set = std::make_shared<TraceSet>(TraceSet::load(root));
  const auto& workloads = set->workloads("rmsnorm_h2048");
  EXPECT_EQ(workloads.size(), 2u);
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    set->add_trace(evaluation_of(workloads[i], "rmsnorm_h2048_naive", EvaluationStatus::kPassed,
                                 0.02 + 0.01 * static_cast<double>(i)));
    set->add_trace(
        evaluation_of(workloads[i], "rmsnorm_h2048_fast", EvaluationStatus::kPassed, 0.01));
    set->add_trace(evaluation_of(workloads[i], "rmsnorm_h2048_wrong_result",
                                 EvaluationStatus::kIncorrectNumerical, 0));
  }
  return set;
}

SiteApi make_api(std::shared_ptr<const TraceSet> set) {
  SiteSource source;
  source.dataset = [set] { return set; };
  source.baseline_author = "fib-examples";  // the naive and fast solutions' author
  return SiteApi(std::move(source));
}

TEST(SiteApi, LeaderboardIsTheReportModulesOutput) {
  const auto set = dataset();
  const SiteApi api = make_api(set);
  const Json board = api.leaderboard();
  report::FastPOptions o;
  o.baseline.author = "fib-examples";
  o.per_definition = true;
  EXPECT_EQ(board["summary"], report::to_json(report::summarize(*set, {"fib-examples", {}})));
  EXPECT_EQ(board["fast_p"], report::to_json(report::fast_p(*set, o)));
  EXPECT_EQ(board["baseline_author"], "fib-examples");
  ASSERT_FALSE(board["summary"]["rankings"].empty());
  EXPECT_EQ(board["summary"]["rankings"][0]["author"], "red-team");
}

// The reports are kept per snapshot: a new snapshot (the server's after an evaluation) is
// reported anew, the same one is not recomputed.
TEST(SiteApi, LeaderboardFollowsTheCurrentSnapshot) {
  std::shared_ptr<const TraceSet> current = dataset();
  SiteSource source;
  source.dataset = [&current] { return current; };
  source.baseline_author = "fib-examples";
  const SiteApi api(std::move(source));
  const Json before = api.leaderboard();
  EXPECT_EQ(api.leaderboard(), before);
  auto grown = std::make_shared<TraceSet>(*current);
  grown->add_trace(evaluation_of(grown->workloads("rmsnorm_h2048")[0], "rmsnorm_h2048_fast",
                                 EvaluationStatus::kRuntimeError, 0));
  current = grown;
  const Json after = api.leaderboard();
  EXPECT_EQ(after["summary"]["totals"]["traces"]["total"].get<std::size_t>(),
            before["summary"]["totals"]["traces"]["total"].get<std::size_t>() + 1);
}

TEST(SiteApi, KernelHasItsInterfaceSolutionsRankedAndTraces) {
  const SiteApi api = make_api(dataset());
  const Json k = api.kernel("rmsnorm_h2048");
  EXPECT_EQ(k["definition"]["axes"].size(), 2u);
  EXPECT_TRUE(k["definition"]["axes"].contains("hidden_size"));
  EXPECT_EQ(k["traces"].size(), 6u);
  EXPECT_EQ(k["workloads"].size(), 2u);
  EXPECT_EQ(k["models"], Json::array({"llama-3.2-1b"}));
  ASSERT_TRUE(k["ranking"].is_object());
  EXPECT_EQ(k["ranking"]["best"]["solution"], "rmsnorm_h2048_fast");
  std::set<std::string> with_curve;
  for (const auto& s : k["fast_p"]["series"]) with_curve.insert(s["name"]);
  EXPECT_TRUE(with_curve.contains("rmsnorm_h2048_wrong_result"));
  for (const auto& s : k["solutions"]) EXPECT_FALSE(s.contains("sources"));
  EXPECT_THROW(api.kernel("no_such_kernel"), NotFound);
}

TEST(SiteApi, TracesListInBriefAndOneInFullWithItsSolution) {
  const SiteApi api = make_api(dataset());
  const Json brief = api.traces("rmsnorm_h2048", "rmsnorm_h2048_fast");
  ASSERT_EQ(brief["traces"].size(), 2u);
  const std::string id = brief["traces"][1]["id"];
  const Json full = api.trace("rmsnorm_h2048", id);
  EXPECT_EQ(full["trace"]["solution"], "rmsnorm_h2048_fast");
  EXPECT_FALSE(full["solution"]["sources"].empty());
  EXPECT_EQ(full["workload"]["uuid"], brief["traces"][1]["workload"]);
  EXPECT_FALSE(full["verified"].get<bool>());
  EXPECT_THROW(api.trace("rmsnorm_h2048", std::string(24, '0')), NotFound);
  EXPECT_THROW(api.traces("no_such_kernel", ""), NotFound);
}

// A trace's id is a hash of its content, not its position: traces added before it (a reload
// that reads another file first, a restart) leave its id and what the id names unchanged.
TEST(SiteApi, TraceIdsNameTheSameTraceWhateverComesBeforeIt) {
  const auto set = dataset();
  const SiteApi api = make_api(set);
  const Json before = api.traces("rmsnorm_h2048", "rmsnorm_h2048_fast");
  ASSERT_EQ(before["traces"].size(), 2u);
  const std::string id = before["traces"][1]["id"];
  EXPECT_EQ(id.size(), 24u);
  EXPECT_EQ(id, trace_id(api.trace("rmsnorm_h2048", id)["trace"]));

  // The same dataset with two new traces before the others.
  auto grown = std::make_shared<TraceSet>(set->root());
  for (const auto& d : set->definitions()) grown->add_definition(d.value);
  for (const auto& w : set->workloads("rmsnorm_h2048")) grown->add_workload(w.value);
  for (const auto& s : set->solutions("rmsnorm_h2048")) grown->add_solution(s.value);
  for (const auto& w : set->workloads("rmsnorm_h2048")) {
    grown->add_trace(evaluation_of(w, "rmsnorm_h2048_naive", EvaluationStatus::kPassed, 0.5));
  }
  for (const auto& t : set->traces("rmsnorm_h2048")) grown->add_trace(t.value);
  const SiteApi after = make_api(grown);
  EXPECT_EQ(after.trace("rmsnorm_h2048", id)["trace"], api.trace("rmsnorm_h2048", id)["trace"]);
  std::set<std::string> ids;
  const Json listed = after.traces("rmsnorm_h2048", "");
  for (const Json& t : listed["traces"]) ids.insert(t["id"]);
  EXPECT_EQ(ids.size(), set->traces("rmsnorm_h2048").size() + 2);
}

TEST(SiteApi, ModelTreeLinksTheDatasetsDefinitions) {
  const auto set = dataset();
  const SiteApi api = make_api(set);
  const Json m = api.model("llama-3.2-1b");
  ASSERT_TRUE(m["graph"].is_object());
  std::set<std::string> in_tree;
  for (const auto& [name, module] : m["graph"]["modules"].items()) {
    for (const auto& d : module["definitions"]) in_tree.insert(d);
  }
  EXPECT_TRUE(in_tree.contains("rmsnorm_h2048"));
  // The example dataset is Llama 3.2 1B's onboarding: every definition of its tree is there.
  for (const auto& d : m["definition_list"]) {
    EXPECT_TRUE(in_tree.contains(d["name"])) << d["name"];
    EXPECT_TRUE(d["in_dataset"].get<bool>()) << d["name"];
    EXPECT_NE(set->definition(d["name"].get<std::string>()), nullptr) << d["name"];
  }
  EXPECT_EQ(m["definition_list"].size(), 16u);
  EXPECT_THROW(api.model("no-such-model"), NotFound);
}

TEST(SiteApi, ModelsListTheBundledOnesAndTheDatasetsOwn) {
  const SiteApi api = make_api(dataset());
  const Json all = api.models();
  bool llama = false;
  for (const auto& m : all["bundled"]) {
    if (m["id"] == "llama-3.2-1b") llama = m["in_dataset"].get<std::size_t>() > 0;
    EXPECT_FALSE(m.contains("error")) << m["id"];
  }
  EXPECT_TRUE(llama);
  ASSERT_EQ(all["onboarded"].size(), 1u);
  EXPECT_EQ(all["onboarded"][0]["id"], "my-own-model");
  const Json own = api.model("my-own-model");
  EXPECT_TRUE(own["graph"].is_null());
  ASSERT_EQ(own["definition_list"].size(), 1u);
  EXPECT_EQ(own["definition_list"][0]["name"], "gemm_custom_model_kernel");
}

}  // namespace
}  // namespace fib::serve
