// fib import flashinfer-calls over level-10 call dumps (tests/data/flashinfer, make_fixtures.py):
// safetensors dumps of every covered operation, .pt dumps read in the sandbox, broken dumps.
#include <gtest/gtest.h>

#include <fstream>

#include "fib/dataset/trace_set.h"
#include "fib/import/import.h"
#include "fib/tensor/safetensors.h"
#include "fib/validate/validator.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::import {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

fs::path fixtures() { return fib::testing::test_data_dir() / "flashinfer"; }

// A dataset holding every fixture definition.
void import_all_definitions(const TempDir& dir) {
  const Report r = import_definitions(fixtures() / "trace", dir.path(), {});
  ASSERT_EQ(r.count(Outcome::kAdded), 19u) << render_text(r);
}

const FileReport& entry(const Report& r, std::string_view folder_suffix) {
  for (const FileReport& f : r.files)
    if (f.file.ends_with(folder_suffix)) return f;
  ADD_FAILURE() << "no report line for " << folder_suffix;
  return r.files.front();
}

void expect_valid(const fs::path& dataset) {
  const TraceSet set = TraceSet::load(dataset);
  EXPECT_FALSE(set.load_diagnostics().has_errors()) << set.load_diagnostics().to_string();
  validate::Options opt;
  opt.checks = {validate::Check::kLayout, validate::Check::kDefinition, validate::Check::kWorkload};
  const validate::Report v = validate::validate_dataset(set, opt);
  EXPECT_FALSE(v.has_errors()) << validate::render_text(v);
}

TEST(ImportWorkloads, SafetensorsDumpsOfEveryOperationValidate) {
  TempDir dir;
  import_all_definitions(dir);
  const Report r = import_workloads(fixtures() / "calls_safetensors", dir.path(), {});
  // 19 calls of the 19 definitions, two more rmsnorm calls, and 4 wrappers' plan() calls.
  ASSERT_EQ(r.files.size(), 25u);
  EXPECT_EQ(r.count(Outcome::kAdded), 20u) << render_text(r);
  EXPECT_EQ(r.count(Outcome::kError), 0u) << render_text(r);
  EXPECT_EQ(r.count(Outcome::kSkipped), 5u) << render_text(r);
  const FileReport& dup = entry(r, "rmsnorm_call0002");
  EXPECT_EQ(dup.outcome, Outcome::kSkipped);
  EXPECT_EQ(dup.notes, (std::vector<std::string>{
                           "hidden_states <- input (by position)",
                           R"(the dataset has a workload of axes {"batch_size":2} already)"}));
  const FileReport& rms = entry(r, "rmsnorm_call0001");
  EXPECT_EQ(rms.target, "workloads/rmsnorm/rmsnorm_h64.jsonl");
  EXPECT_EQ(rms.notes, std::vector<std::string>{"hidden_states <- input (by position)"});
  expect_valid(dir.path());
}

TEST(ImportWorkloads, WrapperRunTakesItsPlansIndexTensors) {
  TempDir dir;
  import_all_definitions(dir);
  const Report r = import_workloads(fixtures() / "calls_safetensors", dir.path(), {});
  const FileReport& run = entry(r, "BatchDecodeWithPagedKVCacheWrapper.run_call0001");
  ASSERT_EQ(run.outcome, Outcome::kAdded) << render_text(r);
  EXPECT_EQ(run.definition, "gqa_paged_decode_h4_kv2_d16_ps4");
  std::ifstream in(dir.path() / "workloads/gqa_paged/gqa_paged_decode_h4_kv2_d16_ps4.jsonl");
  std::string line;
  std::getline(in, line);
  const Json j = Json::parse(line);
  EXPECT_EQ(j["workload"]["axes"],
            Json::parse(R"({"batch_size":2,"num_pages":6,"len_indptr":3,"num_kv_indices":5})"));
  EXPECT_EQ(j["workload"]["inputs"]["sm_scale"], Json::parse(R"({"type":"scalar","value":0.25})"));
  const std::string blob = j["workload"]["inputs"]["kv_indptr"]["path"].get<std::string>();
  const SafetensorsFile st = SafetensorsFile::open(dir.path() / blob);
  EXPECT_EQ(st.keys(), (std::vector<std::string>{"q", "k_cache", "v_cache", "kv_indptr",
                                                 "kv_indices", "kv_last_page_len"}));
  const Tensor indptr = st.read("kv_indptr");
  ASSERT_EQ(indptr.numel(), 3);
  EXPECT_EQ(indptr.get(0), 0);
  EXPECT_EQ(indptr.get(1), 2);
  EXPECT_EQ(indptr.get(2), 5);
}

TEST(ImportWorkloads, AtMostKPerDefinitionAndRerunsAddNothing) {
  TempDir dir;
  import_all_definitions(dir);
  WorkloadImportOptions options;
  options.max_per_definition = 1;
  const Report r = import_workloads(fixtures() / "calls_safetensors", dir.path(), options);
  const FileReport& over = entry(r, "rmsnorm_call0003");
  EXPECT_EQ(over.outcome, Outcome::kSkipped);
  EXPECT_EQ(over.notes, (std::vector<std::string>{"hidden_states <- input (by position)",
                                                  "over --max-per-definition 1"}));
  const Report again = import_workloads(fixtures() / "calls_safetensors", dir.path(), {});
  EXPECT_EQ(again.count(Outcome::kAdded), 1u) << render_text(again);  // rmsnorm, batch 3
  EXPECT_EQ(entry(again, "rmsnorm_call0003").outcome, Outcome::kAdded);
  expect_valid(dir.path());
}

TEST(ImportWorkloads, BrokenCallsAreReportedOneByOne) {
  TempDir dir;
  import_all_definitions(dir);
  const Report r = import_workloads(fixtures() / "broken_calls", dir.path(), {});
  ASSERT_EQ(r.files.size(), 5u) << render_text(r);
  const FileReport& malformed = entry(r, "rmsnorm_call0001");
  EXPECT_EQ(malformed.outcome, Outcome::kError);
  ASSERT_FALSE(malformed.notes.empty());
  EXPECT_EQ(malformed.notes[0].rfind("metadata.jsonl:3: line 1, column ", 0), 0u)
      << malformed.notes[0];
  const FileReport& truncated = entry(r, "rmsnorm_call0002");
  EXPECT_EQ(truncated.outcome, Outcome::kError);
  ASSERT_FALSE(truncated.notes.empty());
  EXPECT_EQ(truncated.notes[0].rfind("inputs.safetensors: ", 0), 0u) << truncated.notes[0];
  const FileReport& dtype = entry(r, "rmsnorm_call0003");
  EXPECT_EQ(dtype.outcome, Outcome::kError);
  EXPECT_EQ(dtype.notes, std::vector<std::string>{
                             "rmsnorm_h64: $.inputs.weight: dtype float32, the definition's is "
                             "bfloat16"});
  const FileReport& range = entry(r, "BatchDecodeWithPagedKVCacheWrapper.run_call0001");
  EXPECT_EQ(range.outcome, Outcome::kError);
  EXPECT_EQ(range.definition, "gqa_paged_decode_h4_kv2_d16_ps4");
  EXPECT_EQ(range.notes,
            std::vector<std::string>{"kv_indices[4] = 9 is outside the 6 pages [0, 6)"});
  EXPECT_FALSE(fs::exists(dir.path() / "workloads"));
  EXPECT_FALSE(fs::exists(dir.path() / "blob"));
}

TEST(ImportWorkloads, CudaGraphFlushesAreSkippedAndSaid) {
  TempDir dir;
  import_all_definitions(dir);
  const fs::path calls = dir.path() / "calls";
  fs::create_directories(calls / "graph_flushes" / "flush_0001");
  const Report r = import_workloads(calls, dir.path(), {});
  ASSERT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].outcome, Outcome::kSkipped);
  EXPECT_EQ(r.files[0].notes, std::vector<std::string>{"CUDA-graph replay snapshots are not "
                                                       "read; dump with CUDA graphs off"});
}

// .pt dumps need bubblewrap and Debian's Python with torch; without them the test says so.
bool pt_reader_available() {
  return fs::exists("/usr/bin/bwrap") &&
         std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0 &&
         std::system(
             "bwrap --ro-bind /usr /usr --symlink usr/lib /lib --symlink usr/lib64 "
             "/lib64 --unshare-all /usr/bin/true >/dev/null 2>&1") == 0;
}

// Every .pt dump is read in one sandboxed child; a malicious pickle among them is refused
// without running, and the others still import.
TEST(ImportWorkloads, PickleDumpsAreReadInTheSandbox) {
  if (!pt_reader_available())
    GTEST_SKIP() << "SKIPPED: needs bubblewrap and /usr/bin/python3 with torch";
  TempDir dir;
  import_all_definitions(dir);
  const fs::path calls = dir.path() / "calls";
  fs::copy(fixtures() / "calls_pt", calls, fs::copy_options::recursive);
  const fs::path evil = calls / "20260101_120000_999_pid4242_rmsnorm_call0009";
  fs::copy(calls / "20260101_120000_001_pid4242_rmsnorm_call0001", evil,
           fs::copy_options::recursive);
  // A pickle that calls os.system("touch") when loaded: GLOBAL posix.system, a string, REDUCE.
  static constexpr char kPickle[] =
      "\x80\x02"
      "cposix\nsystem\n"
      "X\x05\x00\x00\x00touch"
      "\x85R.";
  std::ofstream(evil / "inputs.pt", std::ios::binary) << std::string(kPickle, sizeof kPickle - 1);
  const Report r = import_workloads(calls, dir.path(), {});
  EXPECT_EQ(r.count(Outcome::kAdded), 17u) << render_text(r);
  EXPECT_EQ(r.count(Outcome::kError), 1u) << render_text(r);
  const FileReport& refused = entry(r, "rmsnorm_call0009");
  EXPECT_EQ(refused.outcome, Outcome::kError);
  ASSERT_EQ(refused.notes.size(), 1u);
  EXPECT_EQ(refused.notes[0].rfind("inputs.pt: not a weights-only torch.save file: ", 0), 0u)
      << refused.notes[0];
  EXPECT_NE(refused.notes[0].find("posix.system"), std::string::npos) << refused.notes[0];
  expect_valid(dir.path());
}

}  // namespace
}  // namespace fib::import
