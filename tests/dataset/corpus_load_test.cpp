// Loading the real FlashInfer-Trace corpus (../shared/corpus): counts, indexes and queries,
// checked against the files themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/dataset/trace_set.h"
#include "support/test_paths.h"

namespace fib {
namespace {

namespace fs = std::filesystem;

// The uuids of a workloads file, in line order, read without fib's loader.
std::vector<std::string> uuids_in_file(const fs::path& file) {
  std::vector<std::string> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    out.push_back(Json::parse(line).at("workload").at("uuid").get<std::string>());
  }
  return out;
}

TEST(CorpusLoad, CountsAndNoDiagnostics) {
  FIB_REQUIRE_CORPUS(corpus);
  const TraceSet set = TraceSet::load(corpus);
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  EXPECT_EQ(set.definitions().size(), 136u);
  EXPECT_EQ(set.workload_count(), 663u);
  EXPECT_EQ(set.solution_count(), 0u);
  EXPECT_EQ(set.trace_count(), 0u);
  EXPECT_TRUE(set.orphan_definition_names().empty());
  EXPECT_EQ(set.op_types(), (std::vector<std::string>{
                                "dsa_paged", "gdn", "gemm", "gqa_paged", "gqa_ragged", "mamba_ssu",
                                "mla_paged", "mla_ragged", "moe", "rmsnorm", "rope", "sampling"}));
}

TEST(CorpusLoad, FilesAreSortedWithKindsAndRecordCounts) {
  FIB_REQUIRE_CORPUS(corpus);
  const TraceSet set = TraceSet::load(corpus);
  std::map<FileKind, std::size_t> kinds;
  std::size_t records = 0;
  for (const auto& f : set.files()) {
    ++kinds[f.kind];
    records += f.records;
    if (f.kind == FileKind::kDefinition) {
      EXPECT_EQ(f.records, 1u) << f.path;
      EXPECT_TRUE(f.path.starts_with("definitions/") && f.path.ends_with(".json")) << f.path;
    } else {
      EXPECT_EQ(f.kind, FileKind::kWorkloads) << f.path;
      EXPECT_TRUE(f.path.starts_with("workloads/") && f.path.ends_with(".jsonl")) << f.path;
    }
  }
  EXPECT_EQ(set.files().size(), 162u);  // README.md at the root is not part of any top folder
  EXPECT_EQ(kinds[FileKind::kDefinition], 136u);
  EXPECT_EQ(kinds[FileKind::kWorkloads], 26u);
  EXPECT_EQ(records, 136u + 663u);
  EXPECT_TRUE(std::is_sorted(set.files().begin(), set.files().end(),
                             [](const auto& a, const auto& b) { return a.path < b.path; }));
  EXPECT_EQ(set.files().front().path,
            "definitions/dsa_paged/dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1.json");
  EXPECT_EQ(set.files().back().path, "workloads/rmsnorm/rmsnorm_h7168.jsonl");
  // Definitions come in file (path) order.
  for (std::size_t i = 0; i < set.definitions().size(); ++i) {
    const auto& r = set.definitions()[i];
    EXPECT_EQ(r.source.line, 0u);
    EXPECT_EQ(set.where(r.source), "definitions/" + r.value.op_type + "/" + r.value.name + ".json");
  }
}

TEST(CorpusLoad, QueriesByOpTypeAndTag) {
  FIB_REQUIRE_CORPUS(corpus);
  const TraceSet set = TraceSet::load(corpus);
  const std::map<std::string, std::size_t> expected = {
      {"gqa_paged", 29}, {"gemm", 24},     {"sampling", 21},  {"moe", 19},
      {"rmsnorm", 13},   {"gdn", 9},       {"gqa_ragged", 7}, {"mla_paged", 6},
      {"dsa_paged", 3},  {"mamba_ssu", 2}, {"mla_ragged", 2}, {"rope", 1}};
  std::size_t total = 0;
  for (const auto& [op, n] : expected) {
    const auto defs = set.definitions_with_op_type(op);
    EXPECT_EQ(defs.size(), n) << op;
    for (const auto* d : defs) EXPECT_EQ(d->op_type, op);
    total += defs.size();
  }
  EXPECT_EQ(total, 136u);
  EXPECT_TRUE(set.definitions_with_op_type("GEMM").empty());
  EXPECT_TRUE(set.definitions_with_op_type("").empty());

  EXPECT_EQ(set.definitions_with_tag("status:verified").size(), 77u);
  EXPECT_EQ(set.definitions_with_tag("model:llama-3.1-8b").size(), 14u);
  EXPECT_EQ(set.definitions_with_tag("model:qwen3-30b-a3b").size(), 18u);
  EXPECT_TRUE(set.definitions_with_tag("model:").empty());  // tags match whole, not by prefix
  const auto rope = set.definitions_with_op_type("rope");
  ASSERT_EQ(rope.size(), 1u);
  const Definition* by_name = set.definition(rope[0]->name);
  EXPECT_EQ(by_name, rope[0]);
  EXPECT_EQ(set.definition("gemm_n128_k2048")->op_type, "gemm");
  EXPECT_EQ(set.definition("gemm_n128_k2048_nope"), nullptr);
}

TEST(CorpusLoad, WorkloadByUuidAndInFileOrder) {
  FIB_REQUIRE_CORPUS(corpus);
  const TraceSet set = TraceSet::load(corpus);
  const auto* w = set.workload("6ba7c7de-dc5a-48d2-8ada-1382feb5ceac");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->value.definition, "gemm_n128_k2048");
  EXPECT_EQ(set.where(w->source), "workloads/gemm/gemm_n128_k2048.jsonl:1");
  EXPECT_EQ(w->value.workload.axes, (AxisValues{{"M", 6}}));
  EXPECT_EQ(set.workload("6ba7c7de"), nullptr);
  EXPECT_EQ(set.workload(""), nullptr);

  // Every workloads file: the loader keeps the file's order, with 1-based line numbers.
  std::size_t checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(corpus / "workloads")) {
    if (e.path().extension() != ".jsonl") continue;
    const std::string def = e.path().stem().string();
    const auto expected = uuids_in_file(e.path());
    const auto& got = set.workloads(def);
    ASSERT_EQ(got.size(), expected.size()) << def;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].value.workload.uuid, expected[i]) << def << " #" << i;
      EXPECT_EQ(got[i].source.line, i + 1) << def;
      EXPECT_EQ(got[i].value.definition, def);
      EXPECT_EQ(set.workload(expected[i]), &got[i]);
    }
    checked += got.size();
  }
  EXPECT_EQ(checked, 663u);
  EXPECT_TRUE(set.workloads("rope_no_such_definition").empty());
  EXPECT_TRUE(set.traces("gemm_n128_k2048").empty());
  EXPECT_TRUE(set.solutions("gemm_n128_k2048").empty());
  EXPECT_TRUE(set.best_per_workload("gemm_n128_k2048").empty());
}

TEST(CorpusLoad, ThreadCountDoesNotChangeTheResult) {
  FIB_REQUIRE_CORPUS(corpus);
  const TraceSet one = TraceSet::load(corpus, LoadOptions{1});
  const TraceSet many = TraceSet::load(corpus, LoadOptions{7});
  ASSERT_EQ(one.definitions().size(), many.definitions().size());
  for (std::size_t i = 0; i < one.definitions().size(); ++i) {
    EXPECT_EQ(one.definitions()[i].value.name, many.definitions()[i].value.name);
  }
  ASSERT_EQ(one.files().size(), many.files().size());
  for (std::size_t i = 0; i < one.files().size(); ++i) {
    EXPECT_EQ(one.files()[i].path, many.files()[i].path);
    EXPECT_EQ(one.files()[i].records, many.files()[i].records);
  }
  for (const auto& d : one.definitions()) {
    const auto& a = one.workloads(d.value.name);
    const auto& b = many.workloads(d.value.name);
    ASSERT_EQ(a.size(), b.size()) << d.value.name;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(to_json(a[i].value), to_json(b[i].value));
    }
  }
}

}  // namespace
}  // namespace fib
