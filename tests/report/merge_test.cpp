// report merge: one dataset reproduces itself byte for byte; several merge with conflicts
// reported (first source kept), identical duplicates collapsed and traces concatenated.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "fib/report/datasets.h"
#include "fib/report/merge.h"
#include "fib/report/summary.h"
#include "report/report_fixture.h"
#include "support/test_paths.h"

namespace fib::report {
namespace {

namespace fs = std::filesystem;
using testing::DatasetBuilder;

// Relative path -> bytes of every file under root.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    Diagnostics diag;
    auto text = read_text_file(e.path().string(), diag);
    EXPECT_TRUE(text) << diag.to_string();
    out[fs::relative(e.path(), root).generic_string()] = text.value_or("");
  }
  return out;
}

void expect_identical_trees(const fs::path& a, const fs::path& b) {
  const auto sa = snapshot(a), sb = snapshot(b);
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [path, bytes] : sa) {
    auto it = sb.find(path);
    ASSERT_NE(it, sb.end()) << path << " is missing from the merge";
    EXPECT_EQ(it->second, bytes) << path << " differs";
  }
}

TEST(Merge, CorpusAloneIsReproducedByteForByte) {
  FIB_REQUIRE_CORPUS(corpus);
  fib::testing::TempDir dir;
  const fs::path in = dir.path() / "in", out = dir.path() / "out";
  fib::testing::copy_tree(corpus, in);
  const std::vector<fs::path> inputs{in};
  const MergeReport r = merge_datasets(inputs, out);
  EXPECT_FALSE(r.has_problems()) << render_text(r);
  EXPECT_EQ(r.counts.definitions, 136u);
  EXPECT_EQ(r.counts.workloads, 663u);
  expect_identical_trees(in, out);
}

TEST(Merge, SyntheticDatasetAloneIsReproducedByteForByte) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path() / "in");
  testing::build_golden(b);
  dir.write("in/blob/workloads/gemm/gemm_a/gemm_a_w1.safetensors", std::string("\x01\x02\0x", 4));
  dir.write("in/README.md", "a dataset\n");
  const std::vector<fs::path> inputs{dir.path() / "in"};
  const MergeReport r = merge_datasets(inputs, dir.path() / "out");
  EXPECT_FALSE(r.has_problems()) << render_text(r);
  EXPECT_EQ(r.counts.traces, 13u);
  EXPECT_EQ(r.counts.other_files, 2u);
  expect_identical_trees(dir.path() / "in", dir.path() / "out");
}

TEST(Merge, ConflictsKeepTheFirstSourceAndAreReported) {
  fib::testing::TempDir dir;
  DatasetBuilder a(dir.path() / "a");
  DatasetBuilder b(dir.path() / "b");
  for (DatasetBuilder* x : {&a, &b}) {
    x->definition("gemm_same");
    x->workload("gemm_same", "shared");
    x->solution("same_sol", "gemm_same", "alice");
    x->trace("gemm_same", "same_sol", "shared", "PASSED", 1.0);  // identical in both
  }
  a.trace("gemm_same", "same_sol", "shared", "PASSED", 0.9);
  b.trace("gemm_same", "same_sol", "shared", "PASSED", 0.8);
  // A definition whose description differs: b's copy and everything b built on it go.
  a.definition("gemm_x", "gemm", "first");
  b.definition("gemm_x", "gemm", "second");
  b.workload("gemm_x", "xw");
  b.solution("x_sol", "gemm_x", "bob");
  b.trace("gemm_x", "x_sol", "xw", "PASSED", 1.0);
  // The same solution name with different sources.
  a.solution("dup_sol", "gemm_same", "carol", "// A");
  b.solution("dup_sol", "gemm_same", "carol", "// B");
  b.trace("gemm_same", "dup_sol", "shared", "PASSED", 0.1);  // measures b's code: dropped
  // The same workload uuid with different axes.
  a.workload("gemm_same", "clash", 4);
  b.workload("gemm_same", "clash", 8);
  dir.write("a/README.md", "A\n");
  dir.write("b/README.md", "B\n");
  dir.write("b/blob/extra.bin", "only in b");

  const std::vector<fs::path> inputs{dir.path() / "a", dir.path() / "b"};
  const MergeReport r = merge_datasets(inputs, dir.path() / "out");
  EXPECT_TRUE(r.has_problems());
  ASSERT_EQ(r.conflicts.size(), 4u) << render_text(r);
  std::map<std::string, const Conflict*> by_kind;
  for (const auto& c : r.conflicts) by_kind[c.kind] = &c;

  const Conflict* def = by_kind.at("definition");
  EXPECT_EQ(def->name, "gemm_x");
  EXPECT_EQ(def->kept, (dir.path() / "a" / "definitions/gemm/gemm_x.json").string());
  EXPECT_EQ(def->rejected, (dir.path() / "b" / "definitions/gemm/gemm_x.json").string());
  EXPECT_EQ(def->differing, std::vector<std::string>{"description"});
  EXPECT_EQ(def->dependents_dropped, 3u);  // b's solution, workload and trace of gemm_x

  const Conflict* sol = by_kind.at("solution");
  EXPECT_EQ(sol->name, "dup_sol");
  EXPECT_EQ(sol->dependents_dropped, 1u);
  EXPECT_EQ(sol->differing, std::vector<std::string>{"sources"});

  const Conflict* wl = by_kind.at("workload");
  EXPECT_EQ(wl->name, "clash");
  EXPECT_EQ(wl->differing, std::vector<std::string>{"workload.axes"});
  EXPECT_NE(wl->kept.find("workloads/gemm/gemm_same.jsonl:"), std::string::npos);

  const Conflict* file = by_kind.at("file");
  EXPECT_EQ(file->name, "README.md");

  EXPECT_EQ(r.counts.duplicate_traces, 1u);
  EXPECT_EQ(r.counts.identical_duplicates, 3u);  // gemm_same, shared, same_sol
  EXPECT_EQ(r.counts.dependents_dropped, 4u);

  const fs::path out = dir.path() / "out";
  EXPECT_EQ(dir.read("out/README.md"), "A\n");
  EXPECT_EQ(dir.read("out/blob/extra.bin"), "only in b");
  EXPECT_NE(dir.read("out/definitions/gemm/gemm_x.json").find("\"first\""), std::string::npos);
  EXPECT_FALSE(fs::exists(out / "solutions/bob"));

  // Traces concatenated in input order, the identical one once: 1.0 (both), 0.9 (a), 0.8 (b).
  const TraceSet merged = TraceSet::load(out);
  EXPECT_TRUE(merged.load_diagnostics().empty()) << merged.load_diagnostics().to_string();
  std::vector<double> latencies;
  for (const Trace* t : merged.traces_of_solution("same_sol")) {
    latencies.push_back(t->evaluation->performance->latency_ms);
  }
  EXPECT_EQ(latencies, (std::vector<double>{1.0, 0.9, 0.8}));
  EXPECT_TRUE(merged.traces_of_solution("dup_sol").empty());
  ASSERT_NE(merged.workload("clash"), nullptr);
  EXPECT_EQ(merged.workload("clash")->value.workload.axes[0].second, 4);
  EXPECT_EQ(merged.workloads("gemm_same").size(), 2u);

  const Json j = to_json(r);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["conflicts"].size(), 4u);
  EXPECT_NE(render_text(r).find("Conflicts (4; the first source is kept)"), std::string::npos);
}

TEST(Merge, RecordsMoveToCanonicalPaths) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path() / "in");
  b.definition("gemm_a");
  b.workload("gemm_a", "w1");
  fs::create_directories(dir.path() / "in/definitions/misplaced");
  fs::rename(dir.path() / "in/definitions/gemm/gemm_a.json",
             dir.path() / "in/definitions/misplaced/gemm_a.json");
  const std::vector<fs::path> inputs{dir.path() / "in"};
  const MergeReport r = merge_datasets(inputs, dir.path() / "out");
  EXPECT_FALSE(r.has_problems()) << render_text(r);
  EXPECT_EQ(dir.read("out/definitions/gemm/gemm_a.json"),
            dir.read("in/definitions/misplaced/gemm_a.json"));
  EXPECT_FALSE(fs::exists(dir.path() / "out/definitions/misplaced"));
}

TEST(Merge, UnreadableRecordsAreReportedAndNotCarried) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path() / "in");
  b.definition("gemm_a");
  b.workload("gemm_a", "w1");
  std::string text = dir.read("in/workloads/gemm/gemm_a.jsonl");
  dir.write("in/workloads/gemm/gemm_a.jsonl", text + "{not json}\n");
  const std::vector<fs::path> inputs{dir.path() / "in"};
  const MergeReport r = merge_datasets(inputs, dir.path() / "out");
  EXPECT_TRUE(r.has_problems());
  EXPECT_TRUE(r.diagnostics.has_errors());
  EXPECT_EQ(dir.read("out/workloads/gemm/gemm_a.jsonl"), text);
}

TEST(Merge, RefusesUnsafeOutputs) {
  fib::testing::TempDir dir;
  DatasetBuilder b(dir.path() / "in");
  b.definition("gemm_a");
  const std::vector<fs::path> inputs{dir.path() / "in"};
  EXPECT_THROW((void)merge_datasets(inputs, dir.path() / "in"), Error);
  EXPECT_THROW((void)merge_datasets(inputs, dir.path() / "in" / "merged"), Error);
  EXPECT_THROW((void)merge_datasets(inputs, dir.path()), Error);  // contains the input

  dir.write("busy/keep.txt", "mine");
  EXPECT_THROW((void)merge_datasets(inputs, dir.path() / "busy"), Error);
  EXPECT_FALSE(fs::exists(dir.path() / "busy/definitions"));
  MergeOptions force;
  force.force = true;
  const MergeReport r = merge_datasets(inputs, dir.path() / "busy", force);
  EXPECT_FALSE(r.has_problems());
  EXPECT_TRUE(fs::exists(dir.path() / "busy/definitions/gemm/gemm_a.json"));
  EXPECT_EQ(dir.read("busy/keep.txt"), "mine");

  const std::vector<fs::path> missing{dir.path() / "nope"};
  EXPECT_THROW((void)merge_datasets(missing, dir.path() / "out2"), Error);
  EXPECT_FALSE(fs::exists(dir.path() / "out2"));
}

TEST(Datasets, SeveralFoldersReadAsOne) {
  fib::testing::TempDir dir;
  DatasetBuilder a(dir.path() / "a");
  DatasetBuilder b(dir.path() / "b");
  a.definition("gemm_a");
  b.definition("gemm_a");
  a.workload("gemm_a", "w1");
  b.workload("gemm_a", "w1");
  a.solution("base", "gemm_a", "baseline");
  b.solution("fast", "gemm_a", "alice");
  a.trace("gemm_a", "base", "w1", "PASSED", 1.0);
  b.solution("base", "gemm_a", "baseline");        // identical to a's
  b.trace("gemm_a", "base", "w1", "PASSED", 1.0);  // identical to a's
  b.trace("gemm_a", "fast", "w1", "PASSED", 0.5);
  b.definition("gemm_b", "gemm", "only in b");
  const std::vector<fs::path> roots{dir.path() / "a", dir.path() / "b"};
  const Datasets d = Datasets::load(roots);
  EXPECT_TRUE(d.conflicts().empty());
  EXPECT_EQ(d.view().definitions().size(), 2u);
  EXPECT_EQ(d.view().trace_count(), 2u);
  EXPECT_EQ(d.counts().duplicate_traces, 1u);
  const SummaryReport r = summarize(d.view());
  ASSERT_EQ(r.rankings.size(), 1u);
  EXPECT_EQ(r.rankings[0].author, "alice");
  EXPECT_DOUBLE_EQ(r.rankings[0].avg_speedup, 2.0);

  b.definition("gemm_a_conflict", "gemm", "x");
  a.definition("gemm_a_conflict", "gemm", "y");
  const Datasets d2 = Datasets::load(roots);
  ASSERT_EQ(d2.conflicts().size(), 1u);
  const Diagnostics diag = d2.diagnostics();
  ASSERT_EQ(diag.size(), 1u);
  EXPECT_EQ(diag.items()[0].severity, Severity::kWarning);
  EXPECT_NE(render_diagnostics(diag).find("gemm_a_conflict"), std::string::npos);

  const std::vector<fs::path> none;
  EXPECT_THROW((void)Datasets::load(none), Error);
}

}  // namespace
}  // namespace fib::report
