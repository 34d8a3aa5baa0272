// fib import flashinfer-defs over the fixtures of tests/data/flashinfer (make_fixtures.py): one
// definition dump per operation of FlashInfer's trace coverage list, and broken dumps.
#include <gtest/gtest.h>

#include "fib/base/diagnostics.h"
#include "fib/dataset/trace_set.h"
#include "fib/import/import.h"
#include "fib/validate/validator.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::import {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

fs::path fixtures() { return fib::testing::test_data_dir() / "flashinfer"; }

const FileReport& entry(const Report& r, const std::string& file) {
  for (const FileReport& f : r.files)
    if (f.file == file) return f;
  ADD_FAILURE() << "no report line for " << file;
  return r.files.front();
}

std::string read(const fs::path& p) { return TempDir::read_file(p); }

TEST(ImportDefinitions, EveryCoveredOperationImportsAndValidates) {
  TempDir dir;
  const Report r = import_definitions(fixtures() / "trace", dir.path(), {});
  ASSERT_EQ(r.files.size(), 19u) << render_text(r);
  EXPECT_EQ(r.count(Outcome::kAdded), 19u) << render_text(r);
  const TraceSet set = TraceSet::load(dir.path());
  EXPECT_FALSE(set.load_diagnostics().has_errors()) << set.load_diagnostics().to_string();
  validate::Options opt;
  opt.checks = {validate::Check::kLayout, validate::Check::kDefinition};
  const validate::Report v = validate::validate_dataset(set, opt);
  EXPECT_FALSE(v.has_errors()) << validate::render_text(v);
  EXPECT_EQ(v.definitions.size(), 19u);
}

TEST(ImportDefinitions, ReportsEachRepair) {
  TempDir dir;
  const Report r = import_definitions(fixtures() / "trace", dir.path(), {});
  const FileReport& fused = entry(r, "fused_add_rmsnorm_h64.json");
  EXPECT_EQ(fused.target, "definitions/rmsnorm/fused_add_rmsnorm_h64.json");
  EXPECT_EQ(fused.notes, (std::vector<std::string>{
                             "$.reference: renamed def _fused_add_rmsnorm_reference to def run",
                             "$.outputs.residual: dropped (also an input, updated in place)"}));
  const FileReport& decode = entry(r, "gqa_paged_decode_h4_kv2_d16_ps4.json");
  EXPECT_EQ(decode.notes,
            (std::vector<std::string>{
                "$.reference: renamed def _gqa_paged_decode_reference to def run",
                "$.inputs.kv_indptr.dtype: unknown -> int32 (a plan-time index tensor)",
                "$.inputs.kv_indices.dtype: unknown -> int32 (a plan-time index tensor)",
                "$.inputs.kv_last_page_len.dtype: unknown -> int32 (a plan-time index tensor)"}));
  const FileReport& fp4 = entry(r, "gemm_fp4_n64_k64.json");
  EXPECT_EQ(fp4.notes.back(),
            "op_type 'gemm_fp4' is not one of fib's: evaluated with the default family");
  const std::string written = read(dir.path() / "definitions/rmsnorm/fused_add_rmsnorm_h64.json");
  EXPECT_NE(written.find("def run(hidden_states, residual, weight):"), std::string::npos);
  EXPECT_EQ(written.find("_fused_add_rmsnorm_reference"), std::string::npos);
}

TEST(ImportDefinitions, RepairLeavesACleanDumpAlone) {
  Json j = Json::parse(read(fixtures() / "trace/rmsnorm_h64.json"));
  const Json before = j;
  std::vector<std::string> notes = repair_definition(j);
  ASSERT_EQ(notes.size(), 1u);  // only the reference's name
  j["reference"] = before["reference"];
  EXPECT_EQ(j, before);
  Json fixed = j;
  fixed["reference"] =
      "import torch\n\ndef run(hidden_states, weight):\n    return hidden_states\n";
  EXPECT_TRUE(repair_definition(fixed).empty());
}

TEST(ImportDefinitions, TagsAreAddedOnceAndRerunIsUnchanged) {
  TempDir dir;
  const DefinitionImportOptions options{parse_workflow_tags("model:llama-3.1-8b,tp:8,ep:1")};
  const Report first = import_definitions(fixtures() / "trace", dir.path(), options);
  const FileReport& rms = entry(first, "rmsnorm_h64.json");
  EXPECT_EQ(rms.notes,
            (std::vector<std::string>{"$.reference: renamed def _rmsnorm_reference to def run",
                                      "$.tags: added model:llama-3.1-8b", "$.tags: added tp:8",
                                      "$.tags: added ep:1"}));
  const Report again = import_definitions(fixtures() / "trace", dir.path(), options);
  EXPECT_EQ(again.count(Outcome::kUnchanged), 19u) << render_text(again);
  // Other tags make a different definition of the same name: the dataset's is kept.
  const Report other =
      import_definitions(fixtures() / "trace", dir.path(), {parse_workflow_tags("model:qwen3-8b")});
  const FileReport& kept = entry(other, "rmsnorm_h64.json");
  EXPECT_EQ(kept.outcome, Outcome::kKept);
  EXPECT_EQ(kept.notes.back(), "the dataset's definition differs in tags; it was kept");
  EXPECT_NE(read(dir.path() / "definitions/rmsnorm/rmsnorm_h64.json").find("llama-3.1-8b"),
            std::string::npos);
}

TEST(ImportDefinitions, BadTagsAreRefused) {
  EXPECT_THROW(parse_workflow_tags("model"), Error);
  EXPECT_THROW(parse_workflow_tags("tp:0"), Error);
  EXPECT_THROW(parse_workflow_tags("gpu:h100"), Error);
  try {
    parse_workflow_tags("model:x,ep:two");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--tags: error: 'ep:two': ep takes a positive integer");
  }
}

TEST(ImportDefinitions, BrokenDumpsAreReportedAndNothingIsWritten) {
  TempDir dir;
  const Report r = import_definitions(fixtures() / "broken_trace", dir.path(), {});
  ASSERT_EQ(r.files.size(), 3u);
  EXPECT_EQ(r.count(Outcome::kError), 3u);
  const FileReport& malformed = entry(r, "malformed.json");
  ASSERT_EQ(malformed.notes.size(), 1u);
  EXPECT_NE(malformed.notes[0].find("line 5"), std::string::npos) << malformed.notes[0];
  const FileReport& truncated = entry(r, "truncated.json");
  ASSERT_EQ(truncated.notes.size(), 1u);
  EXPECT_NE(truncated.notes[0].find("unexpected end of input"), std::string::npos)
      << truncated.notes[0];
  const FileReport& unknown = entry(r, "unknown_dtype.json");
  ASSERT_FALSE(unknown.notes.empty());
  EXPECT_EQ(unknown.notes[0].rfind("$.inputs.weight.dtype:", 0), 0u) << unknown.notes[0];
  EXPECT_FALSE(fs::exists(dir.path() / "definitions"));
}

TEST(ImportDefinitions, AMissingDumpFolderIsAnError) {
  TempDir dir;
  EXPECT_THROW(import_definitions(dir.path() / "nope", dir.path(), {}), Error);
}

}  // namespace
}  // namespace fib::import
