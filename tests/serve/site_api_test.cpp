// The web interface's JSON (serve/site_api.h) over the bundled example dataset with traces
// added in memory: the leaderboard is the report module's output, kernels, traces and models
// say what the dataset holds, and unknown names are errors.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <set>

#include "fib/base/diagnostics.h"
#include "fib/reference/reference.h"
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
  const Json fast_p = report::to_json(report::fast_p(*set, o));
  EXPECT_EQ(board["fast_p"], compact_fast_p(fast_p, false));
  EXPECT_EQ(board["baseline_author"], "fib-examples");
  // Each curve is the report's, as the points where it takes a new level, and the solution
  // series are the kernel pages' (the leaderboard draws authors).
  const auto& grid = fast_p["grid"];
  std::size_t authors = 0;
  for (const auto& s : fast_p["series"]) authors += s["kind"] != "solution";
  ASSERT_EQ(board["fast_p"]["series"].size(), authors);
  for (std::size_t i = 0, j = 0; i < fast_p["series"].size(); ++i) {
    const auto& full = fast_p["series"][i];
    if (full["kind"] == "solution") continue;
    const auto& steps = board["fast_p"]["series"][j++]["steps"];
    std::vector<double> levels;
    const auto& curve = full["curve"];
    for (std::size_t k = 0; k < curve.size(); ++k) {
      if (k == 0 || curve[k] != curve[k - 1] || k + 1 == curve.size()) levels.push_back(curve[k]);
    }
    ASSERT_EQ(steps["fast_p"].size(), levels.size()) << full["name"];
    for (std::size_t k = 0; k < levels.size(); ++k) {
      EXPECT_NEAR(steps["fast_p"][k].get<double>(), levels[k], 5e-4) << full["name"];
    }
    EXPECT_NEAR(steps["p"][0].get<double>(), grid[0].get<double>(),
                1e-3 * std::abs(grid[0].get<double>()));
  }
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
  EXPECT_EQ(k["trace_count"], 6u);
  std::string why;
  const auto* native = reference::find_kernel(*dataset()->definition("rmsnorm_h2048"), &why);
  ASSERT_NE(native, nullptr) << why;
  EXPECT_EQ(k["native_reference"], std::string(native->id()));
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
  EXPECT_EQ(brief["total"], 2u);
  const std::string id = brief["traces"][1]["id"];
  const Json full = api.trace("rmsnorm_h2048", id);
  EXPECT_EQ(full["trace"]["solution"], "rmsnorm_h2048_fast");
  EXPECT_FALSE(full["solution"]["sources"].empty());
  EXPECT_EQ(full["workload"]["uuid"], brief["traces"][1]["workload"]);
  EXPECT_FALSE(full["verified"].get<bool>());
  EXPECT_THROW(api.trace("rmsnorm_h2048", std::string(24, '0')), NotFound);
  EXPECT_THROW(api.traces("no_such_kernel", ""), NotFound);
}

// A curve with more steps than the cap keeps its first and last points and stays decreasing.
TEST(SiteApi, CurveStepsAreCappedKeepingBothEnds) {
  std::vector<double> grid, curve;
  for (int k = 0; k < 5000; ++k) {
    grid.push_back(0.001 * k);
    curve.push_back(100.0 - 0.02 * k);
  }
  const Json steps = curve_steps(grid, curve, kMaxCurvePoints);
  ASSERT_EQ(steps["p"].size(), kMaxCurvePoints);
  EXPECT_EQ(steps["p"][0], 0.0);
  EXPECT_EQ(steps["fast_p"][0], 100.0);
  EXPECT_NEAR(steps["p"].back().get<double>(), 4.999, 1e-9);
  EXPECT_NEAR(steps["fast_p"].back().get<double>(), 0.02, 1e-9);
  for (std::size_t k = 1; k < kMaxCurvePoints; ++k) {
    EXPECT_LT(steps["fast_p"][k].get<double>(), steps["fast_p"][k - 1].get<double>());
  }
  const Json flat = curve_steps({0.5, 1, 2}, {40, 40, 40}, kMaxCurvePoints);
  EXPECT_EQ(flat, Json::parse(R"({"p": [0.5, 2], "fast_p": [40, 40]})"));
}

// The example's definitions with 3,000 solutions by 30 authors and 10,000 traces on 40
// workloads each (in memory): the leaderboard's JSON gzips to under 200 kB and a page of
// traces is the page asked for.
TEST(SiteApi, LeaderboardAndTracesStaySmallAtScale) {
  auto set = std::make_shared<TraceSet>(*dataset());
  std::vector<std::string> defs;
  for (const auto& name : report::definition_names(*set)) {
    if (!set->workloads(name).empty() && !set->solutions(name).empty()) defs.push_back(name);
  }
  ASSERT_FALSE(defs.empty());
  for (const auto& d : defs) {
    const Trace first = set->workloads(d)[0].value;
    for (int w = 0; w < 40; ++w) {
      Trace more = first;
      more.workload.uuid = fmt::format("{}-generated-{}", d, w);
      set->add_workload(more);
    }
  }
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i) {
    const std::string& d = defs[static_cast<std::size_t>(i) % defs.size()];
    Solution s = set->solutions(d)[0].value;
    s.name = fmt::format("{}_generated_{}", d, i);
    s.author = fmt::format("author-{}", i % 30);
    set->add_solution(s);
    names.push_back(s.name);
  }
  for (int i = 0; i < 10000; ++i) {
    const std::string& solution = names[static_cast<std::size_t>(i * 7919) % names.size()];
    const std::string& d = set->solution(solution)->value.definition;
    const auto& workloads = set->workloads(d);
    const auto status = i % 5 == 0 ? EvaluationStatus::kRuntimeError : EvaluationStatus::kPassed;
    set->add_trace(evaluation_of(workloads[static_cast<std::size_t>(i) % workloads.size()],
                                 solution, status, 0.001 * (1 + (i * 37) % 997)));
  }
  const SiteApi api = make_api(set);
  const std::string board = api.leaderboard().dump();
  const std::size_t gzipped = gzip(board).size();
  std::cout << fmt::format("leaderboard: {} kB, {} kB gzipped\n", board.size() / 1000,
                           gzipped / 1000);
  EXPECT_LT(gzipped, 200'000u);
  for (const auto& s : api.kernel(defs[0])["fast_p"]["series"]) {
    EXPECT_LE(s["steps"]["p"].size(), kMaxCurvePoints);
  }
  const std::size_t total = set->traces(defs[0]).size();
  const Json page = api.traces(defs[0], "", {3, 50});
  EXPECT_EQ(page["total"], total);
  EXPECT_EQ(page["page"], 3u);
  EXPECT_EQ(page["page_size"], 50u);
  ASSERT_EQ(page["traces"].size(), 50u);
  EXPECT_EQ(page["traces"][0]["id"], trace_id(set->traces(defs[0])[100].value));
  const Json last = api.traces(defs[0], "", {(total + 49) / 50, 50});
  EXPECT_EQ(last["traces"].size(), total % 50 == 0 ? 50u : total % 50);
  EXPECT_TRUE(api.traces(defs[0], "", {1000, 50})["traces"].empty());
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
  // The example dataset is Llama 3.2 1B's onboarding from before the embedding, min-p sampling,
  // the renormalizations and the paged KV append had op types: every other definition of its
  // tree is there.
  const std::set<std::string> newer = {
      "embedding_v128256_h2048",           "min_p_sampling_from_probs_v128256",
      "top_k_renorm_probs_v128256",        "top_p_renorm_probs_v128256",
      "append_paged_kv_cache_kv8_d64_ps1", "append_paged_kv_cache_kv8_d64_ps64"};
  for (const auto& d : m["definition_list"]) {
    EXPECT_TRUE(in_tree.contains(d["name"])) << d["name"];
    const bool in_example = !newer.contains(d["name"].get<std::string>());
    EXPECT_EQ(d["in_dataset"].get<bool>(), in_example) << d["name"];
    EXPECT_EQ(set->definition(d["name"].get<std::string>()) != nullptr, in_example) << d["name"];
  }
  EXPECT_EQ(m["definition_list"].size(), 23u);
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
