// The apply table's file format, its cache keyed by the dataset's content, artifacts in the
// build cache, the solution digest against Python, and the FlashInfer Trace Apply export.
#include <gtest/gtest.h>

#include <fstream>

#include "apply/apply_fixture.h"
#include "fib/apply/cache.h"
#include "fib/apply/export.h"
#include "fib/apply/table.h"

namespace fib::apply {
namespace {

namespace fs = std::filesystem;
using testing::ApplyDataset;
using testing::latency;

struct Fixture {
  fib::testing::TempDir dir;
  ApplyDataset b{dir.path() / "data"};
  SigningKey me = testing::key_of(1);
  ApplyOptions options;

  Fixture() {
    b.signer = &me;
    options.trusted.key_ids.insert(me.public_key().key_id());
    b.definition("gemm_a");
    b.definition("gemm_b");
    b.solution("a_fast", "gemm_a");
    b.solution("a_slow", "gemm_a", "bob");
    b.solution("b_py", "gemm_b", "carol", "python", "def run(A, C):\n    C.copy_(A)\n");
    b.trace("gemm_a", "a_fast", "w4", 4, "PASSED", latency(0.5));
    b.trace("gemm_a", "a_slow", "w4", 4, "PASSED", latency(1.0));
    b.trace("gemm_a", "a_slow", "w8", 8, "PASSED", latency(1.0));
    b.trace("gemm_a", "a_fast", "w8", 8, "PASSED", latency(0.25));
    b.trace("gemm_b", "b_py", "v", 2, "PASSED", latency(2.0));
  }
};

// Python's json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False) of the
// same record, through hashlib.sha256, gives this (docs/apply.md).
TEST(ApplyDigest, MatchesPythonsCanonicalJson) {
  const Solution s =
      ApplyDataset::make_solution("s", "gemm_a", "alice", "cpp", "// kernel \xc3\xa9\n");
  EXPECT_EQ(solution_digest(s),
            "sha256:62970ff3d57d64383c0e8ec9920a9c49da52ee2e8374187f67ddfe396c932e79");
}

TEST(ApplyTableJson, RoundTripsAndNamesItsFields) {
  Fixture f;
  ApplyTable t = build_table(f.b.load(), f.options);
  t.dataset_digest = "sha256:00";
  const Json j = to_json(t);
  EXPECT_EQ(j["format"], "fib-apply-table");
  EXPECT_EQ(j["version"], 1);
  const Json& e = j["definitions"]["gemm_a"]["entries"][1];
  EXPECT_EQ(e["axes"], Json({{"M", 8}}));
  EXPECT_EQ(e["solution"], "a_fast");
  EXPECT_EQ(e["language"], "cpp");
  EXPECT_EQ(e["binding"], "tvm-ffi");
  EXPECT_EQ(e["entry_point"], "main.cpp::run");
  EXPECT_EQ(e["destination_passing_style"], true);
  EXPECT_EQ(e["latency_ms"], 0.25);
  EXPECT_EQ(e["speedup"], 40.0);
  EXPECT_EQ(e["traces"], 1);
  EXPECT_EQ(e["artifact"], nullptr);
  EXPECT_EQ(j["definitions"]["gemm_b"]["entries"][0]["binding"], nullptr);
  EXPECT_EQ(j["definitions"]["gemm_a"]["fallback"]["solution"], "a_fast");
  EXPECT_EQ(j["definitions"]["gemm_a"]["fallback"]["axes_won"], 2);
  EXPECT_EQ(j["options"]["max_nmse"], 1e-3);
  EXPECT_EQ(j["options"]["max_rel_error"], nullptr);
  EXPECT_EQ(j["skipped"]["digest_mismatch"], 0);
  EXPECT_EQ(to_json(table_from_json(j, "t.json")), j);
}

TEST(ApplyTableJson, RefusesAnotherFormatOrVersion) {
  Json j{{"format", "fib-apply-table"}, {"version", 2}};
  try {
    table_from_json(j, "t.json");
    FAIL() << "accepted version 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("$.version: expected 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(table_from_json(Json{{"format", "other"}}, "t.json"), Error);
}

// A built entry of fib's build cache, as the builder leaves it.
void fake_cache_entry(const fs::path& cache, const std::string& key, const std::string& file) {
  const fs::path entry = cache / key.substr(0, 2) / key;
  fs::create_directories((entry / file).parent_path());
  std::ofstream(entry / file) << "built";
  std::ofstream(entry / "meta.json") << R"({"status": "built"})";
}

TEST(ApplyTable, FindsTheBuiltArtifactByTheSignedBuildKey) {
  Fixture f;
  const std::string key = testing::TraceSpec{}.build_key;
  f.options.build_cache = f.dir.path() / "build-cache";
  EXPECT_FALSE(build_table(f.b.load(), f.options).lookup("gemm_a", {{"M", 4}})->choice.artifact);
  fake_cache_entry(f.options.build_cache, key, "solution.so");
  fake_cache_entry(f.options.build_cache, key, "src/main.py");
  const ApplyTable t = build_table(f.b.load(), f.options);
  const auto& a = t.lookup("gemm_a", {{"M", 4}})->choice.artifact;
  ASSERT_TRUE(a);
  EXPECT_EQ(a->kind, "shared_object");
  EXPECT_EQ(a->path, f.options.build_cache / key.substr(0, 2) / key / "solution.so");
  EXPECT_EQ(a->build_key, key);
  const auto& py = t.lookup("gemm_b", {{"M", 2}})->choice.artifact;
  ASSERT_TRUE(py);
  EXPECT_EQ(py->kind, "python_source");
  EXPECT_EQ(py->path.filename(), "main.py");
}

TEST(ApplyCache, HitsUntilATraceOrSolutionChanges) {
  Fixture f;
  const fs::path cache = f.dir.path() / "apply-cache";
  Diagnostics diag;
  const CachedTable first = load_or_build(f.b.root(), f.options, cache, diag);
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(fs::is_regular_file(first.file));
  const CachedTable second = load_or_build(f.b.root(), f.options, cache, diag);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.file, first.file);
  EXPECT_EQ(to_json(second.table), to_json(first.table));

  f.b.trace("gemm_a", "a_slow", "w16", 16, "PASSED", latency(1.0));  // a trace appended
  const CachedTable third = load_or_build(f.b.root(), f.options, cache, diag);
  EXPECT_FALSE(third.from_cache);
  EXPECT_NE(third.file, first.file);
  EXPECT_NE(third.table.lookup("gemm_a", {{"M", 16}}), nullptr);

  f.b.overwrite_solution("a_slow", "gemm_a", "// changed", "bob");  // a solution edited
  const CachedTable fourth = load_or_build(f.b.root(), f.options, cache, diag);
  EXPECT_FALSE(fourth.from_cache);
  EXPECT_EQ(fourth.table.lookup("gemm_a", {{"M", 16}}), nullptr);  // its traces: old digest

  ApplyOptions other = f.options;
  other.max_nmse.reset();
  EXPECT_FALSE(load_or_build(f.b.root(), other, cache, diag).from_cache);  // options count too
  EXPECT_TRUE(load_or_build(f.b.root(), f.options, cache, diag).from_cache);
}

std::vector<std::string> files_under(const fs::path& root) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) files.push_back(fs::relative(e.path(), root).generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ApplyExport, WritesOneSolutionPerDefinitionInTraceApplysLayout) {
  Fixture f;
  const TraceSet set = f.b.load();
  const ApplyTable t = build_table(set, f.options);
  const fs::path out = f.dir.path() / "fi-trace";
  const ExportResult r = export_trace_apply(t, set, out);
  const std::vector<std::string> golden = {
      "definitions/gemm/gemm_a.json",
      "definitions/gemm/gemm_b.json",
      "fib-apply-export.json",
      "solutions/alice/gemm/gemm_a/a_fast.json",
      "solutions/carol/gemm/gemm_b/b_py.json",
  };
  EXPECT_EQ(r.files, golden);
  EXPECT_EQ(files_under(out), golden);
  EXPECT_EQ(r.definitions, 2u);
  // The records byte for byte as the dataset holds them.
  for (const char* same :
       {"definitions/gemm/gemm_a.json", "solutions/alice/gemm/gemm_a/a_fast.json"}) {
    EXPECT_EQ(fib::testing::TempDir::read_file(out / same),
              fib::testing::TempDir::read_file(f.b.root() / same))
        << same;
  }
  Diagnostics diag;
  const auto manifest = read_json_file((out / "fib-apply-export.json").string(), diag);
  ASSERT_TRUE(manifest);
  EXPECT_EQ((*manifest)["definitions"]["gemm_a"]["solution"], "a_fast");
  EXPECT_EQ((*manifest)["definitions"]["gemm_a"]["digest"],
            solution_digest(set.solution("a_fast")->value));

  // Again, after a_fast failed a run: a_slow is chosen, and the folder is replaced whole.
  f.b.trace("gemm_a", "a_fast", "w4c", 4, "RUNTIME_ERROR");
  const TraceSet again = f.b.load();
  export_trace_apply(build_table(again, f.options), again, out);
  EXPECT_TRUE(fs::exists(out / "solutions/bob/gemm/gemm_a/a_slow.json"));
  EXPECT_FALSE(fs::exists(out / "solutions/alice/gemm/gemm_a/a_fast.json"));
  for (const auto& e : fs::directory_iterator(f.dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".fi-trace.fib-export"), std::string::npos);
  }
}

TEST(ApplyExport, LeavesOutADefinitionWhoseSolutionsWereAllExcluded) {
  Fixture f;
  f.b.trace("gemm_b", "b_py", "v2", 2, "TIMEOUT");
  const TraceSet set = f.b.load();
  const ApplyTable t = build_table(set, f.options);
  EXPECT_TRUE(t.definitions.at("gemm_b").entries.empty());
  const ExportResult r = export_trace_apply(t, set, f.dir.path() / "fi");
  EXPECT_EQ(r.definitions, 1u);
  EXPECT_EQ(r.files,
            (std::vector<std::string>{"definitions/gemm/gemm_a.json", "fib-apply-export.json",
                                      "solutions/alice/gemm/gemm_a/a_fast.json"}));
}

TEST(ApplyExport, RefusesAFolderThatIsNoExport) {
  Fixture f;
  const TraceSet set = f.b.load();
  const fs::path out = f.dir.path() / "mine";
  f.dir.write("mine/notes.txt", "keep me");
  try {
    export_trace_apply(build_table(set, f.options), set, out);
    FAIL() << "replaced a folder that was no export";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds files but no fib-apply-export.json"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(f.dir.read("mine/notes.txt"), "keep me");
}

TEST(ApplyExport, RefusesASolutionChangedSinceTheTable) {
  Fixture f;
  const ApplyTable t = build_table(f.b.load(), f.options);
  f.b.overwrite_solution("a_fast", "gemm_a", "// swapped after the table was made");
  const TraceSet changed = f.b.load();
  const fs::path out = f.dir.path() / "fi-trace";
  try {
    export_trace_apply(t, changed, out);
    FAIL() << "exported a changed solution";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("differs from the one its signed traces measured"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace fib::apply
