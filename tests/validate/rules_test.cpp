// Each validation rule on a small synthetic dataset: the failing example and its message.
#include <gtest/gtest.h>

#include <cstring>

#include "fib/dataset/trace_set.h"
#include "fib/validate/validator.h"
#include "support/temp_dir.h"

namespace fib::validate {
namespace {

using testing::TempDir;

constexpr const char* kDefinition = R"J({
  "name": "toy_paged_ps1",
  "op_type": "toy",
  "axes": {
    "batch_size": {"type": "var"},
    "len_indptr": {"type": "var"},
    "num_kv_indices": {"type": "var"},
    "num_pages": {"type": "var"},
    "head_dim": {"type": "const", "value": 4}
  },
  "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
  "inputs": {
    "q": {"shape": ["batch_size", "head_dim"], "dtype": "float32"},
    "kv_cache": {"shape": ["num_pages", "head_dim"], "dtype": "float32"},
    "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
    "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
    "scale": {"shape": null, "dtype": "float32"}
  },
  "outputs": {"out": {"shape": ["batch_size", "head_dim"], "dtype": "float32"}},
  "reference": "def run(q, kv_cache, kv_indptr, kv_indices, scale):\n    return q\n"
})J";

std::string workload_line(const std::string& uuid, int batch, int len_indptr, int nnz,
                          const std::string& indptr_input = R"({"type": "random"})") {
  return R"({"definition": "toy_paged_ps1", "solution": null, "workload": {"uuid": ")" + uuid +
         R"(", "axes": {"batch_size": )" + std::to_string(batch) + R"(, "len_indptr": )" +
         std::to_string(len_indptr) + R"(, "num_kv_indices": )" + std::to_string(nnz) +
         R"(, "num_pages": 16}, "inputs": {"q": {"type": "random"}, "kv_cache": {"type": "random"}, "kv_indptr": )" +
         indptr_input +
         R"(, "kv_indices": {"type": "random"}, "scale": {"type": "scalar", "value": 0.5}}}, "evaluation": null})";
}

// A safetensors file holding one int32 tensor.
std::string safetensors_i32(const std::string& key, const std::vector<std::int32_t>& values,
                            const std::string& dtype = "I32") {
  const std::string header = R"({")" + key + R"(": {"dtype": ")" + dtype + R"(", "shape": [)" +
                             std::to_string(values.size()) + R"(], "data_offsets": [0, )" +
                             std::to_string(values.size() * 4) + "]}}";
  std::string out(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += header;
  for (auto v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

std::string blob_input(const std::string& path, const std::string& key) {
  return R"({"type": "safetensors", "path": ")" + path + R"(", "tensor_key": ")" + key + R"("})";
}

const std::string kSolution =
    R"({"name": "toy_base", "definition": "toy_paged_ps1", "author": "baseline",
  "spec": {"language": "cpp", "target_hardware": ["cpu"], "entry_point": "main.cpp::run"},
  "sources": [{"path": "main.cpp", "content": "int x;"}]})";

std::string trace_line(const std::string& solution, const std::string& uuid,
                       const std::string& status = "PASSED") {
  std::string eval =
      R"({"status": ")" + status + R"(", "environment": {"hardware": "cpu"}, "timestamp": "t")";
  if (status == "PASSED") {
    eval +=
        R"(, "correctness": {"max_relative_error": 0, "max_absolute_error": 0}, "performance": {"latency_ms": 1, "reference_latency_ms": 2, "speedup_factor": 2}})";
  } else {
    eval += "}";
  }
  std::string w = workload_line(uuid, 3, 4, 5);
  // Reuse the workload record, replacing the null solution/evaluation.
  const auto sol_pos = w.find(R"("solution": null)");
  w.replace(sol_pos, 16, R"("solution": ")" + solution + "\"");
  const auto eval_pos = w.find(R"("evaluation": null)");
  w.replace(eval_pos, 18, R"("evaluation": )" + eval);
  return w;
}

struct Dataset {
  TempDir dir;
  Dataset() { dir.write("definitions/toy/toy_paged_ps1.json", kDefinition); }
  Report validate(Options opt = {}) const {
    return validate_dataset(TraceSet::load(dir.path()), opt);
  }
};

std::vector<Message> messages(const Report& r, Check c, Severity level) {
  std::vector<Message> out;
  for (const auto& d : r.definitions) {
    for (const auto& m : d.at(c).messages) {
      if (m.level == level) out.push_back(m);
    }
  }
  return out;
}
std::vector<Message> dataset_messages(const Report& r, Severity level) {
  std::vector<Message> out;
  for (const auto& m : r.dataset_messages.messages) {
    if (m.level == level) out.push_back(m);
  }
  return out;
}

TEST(ValidateRules, CleanDatasetIsOk) {
  Dataset ds;
  ds.dir.write("workloads/toy/toy_paged_ps1.jsonl", workload_line("u1", 3, 4, 5) + "\n");
  const Report r = ds.validate();
  ASSERT_EQ(r.definitions.size(), 1u);
  EXPECT_EQ(r.definitions[0].status, Status::kOk);
  EXPECT_FALSE(r.has_errors());
  const auto info = messages(r, Check::kWorkload, Severity::kInfo);
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].message, "1 of 1 workloads valid");
}

// A record away from its canonical path is loaded and warned about, never an error: upstream's
// TraceSet loads every record file under its top folder wherever it sits.
TEST(ValidateRules, DefinitionAtTheWrongPath) {
  TempDir dir;
  dir.write("definitions/other/toy_paged_ps1.json", kDefinition);
  const Report r = validate_dataset(TraceSet::load(dir.path()), {});
  EXPECT_FALSE(r.has_errors());
  const auto w = messages(r, Check::kLayout, Severity::kWarning);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].message,
            "definition 'toy_paged_ps1' of op_type 'toy' is stored at "
            "definitions/other/toy_paged_ps1.json, "
            "expected definitions/toy/toy_paged_ps1.json");
  EXPECT_EQ(w[0].file, "definitions/other/toy_paged_ps1.json");
  EXPECT_EQ(w[0].hint, "loaded from there; move the file, or fix its name/op_type");
}

// Upstream's own example dataset keeps its definition and solution directly under
// definitions/ and solutions/, and its workloads in workloads/<definition>.jsonl.
TEST(ValidateRules, UpstreamsFlatLayoutLoadsWithWarnings) {
  TempDir dir;
  dir.write("definitions/toy_paged_ps1.json", kDefinition);
  dir.write("workloads/toy_paged_ps1.jsonl", workload_line("u1", 3, 4, 5) + "\n");
  dir.write("solutions/toy_base.json", kSolution);
  dir.write("traces/toy_paged_ps1.jsonl", trace_line("toy_base", "u1") + "\n" +
                                              trace_line("toy_base", "u1", "RUNTIME_ERROR") + "\n");
  const TraceSet set = TraceSet::load(dir.path());
  EXPECT_FALSE(set.load_diagnostics().has_errors()) << set.load_diagnostics().to_string();
  ASSERT_NE(set.definition("toy_paged_ps1"), nullptr);
  EXPECT_EQ(set.workloads("toy_paged_ps1").size(), 1u);
  EXPECT_EQ(set.solutions("toy_paged_ps1").size(), 1u);
  EXPECT_EQ(set.traces("toy_paged_ps1").size(), 2u);
  const Report r = validate_dataset(set, {});
  EXPECT_FALSE(r.has_errors());
  EXPECT_TRUE(messages(r, Check::kLayout, Severity::kError).empty());
  const auto w = messages(r, Check::kLayout, Severity::kWarning);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].message,
            "definition 'toy_paged_ps1' of op_type 'toy' is stored at "
            "definitions/toy_paged_ps1.json, expected definitions/toy/toy_paged_ps1.json");
  EXPECT_EQ(w[1].message,
            "workload u1 of 'toy_paged_ps1' is stored in workloads/toy_paged_ps1.jsonl, expected "
            "workloads/toy/toy_paged_ps1.jsonl");
  EXPECT_EQ(w[2].message,
            "solution 'toy_base' (author 'baseline') is stored at solutions/toy_base.json, "
            "expected solutions/baseline/toy/toy_paged_ps1/toy_base.json");
  EXPECT_EQ(w[3].message,
            "2 traces of solution 'toy_base' (author 'baseline') are stored in "
            "traces/toy_paged_ps1.jsonl, expected traces/baseline/toy/toy_paged_ps1.jsonl");
  EXPECT_EQ(w[3].file, "traces/toy_paged_ps1.jsonl:1");
}

TEST(ValidateRules, WorkloadInTheWrongFileAndDuplicateUuid) {
  Dataset ds;
  ds.dir.write("workloads/toy/elsewhere.jsonl",
               workload_line("u1", 3, 4, 5) + "\n" + workload_line("u1", 3, 4, 5) + "\n");
  const Report r = ds.validate();
  // One finding for the file, not one per record.
  const auto layout = messages(r, Check::kLayout, Severity::kWarning);
  ASSERT_EQ(layout.size(), 1u);
  EXPECT_EQ(layout[0].message,
            "2 workloads of 'toy_paged_ps1' (the first: u1) are stored in "
            "workloads/toy/elsewhere.jsonl, expected workloads/toy/toy_paged_ps1.jsonl");
  EXPECT_EQ(layout[0].file, "workloads/toy/elsewhere.jsonl:1");
  const auto dup = messages(r, Check::kWorkload, Severity::kError);
  ASSERT_EQ(dup.size(), 1u);
  EXPECT_EQ(dup[0].message,
            "duplicate workload uuid u1 (first at workloads/toy/elsewhere.jsonl:1)");
  EXPECT_EQ(dup[0].file, "workloads/toy/elsewhere.jsonl:2");
}

TEST(ValidateRules, AxisConstraintViolation) {
  Dataset ds;
  ds.dir.write("workloads/toy/toy_paged_ps1.jsonl", workload_line("u1", 3, 5, 5) + "\n");
  const auto e = messages(ds.validate(), Check::kWorkload, Severity::kError);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(
      e[0].message,
      "violates constraint 'len_indptr == batch_size + 1': len_indptr (5) == batch_size + 1 (4)");
  EXPECT_EQ(e[0].path, "$.workload.axes");
  EXPECT_EQ(e[0].file, "workloads/toy/toy_paged_ps1.jsonl:1");
}

TEST(ValidateRules, BlobsAbsentAltogetherIsOnlyANote) {
  Dataset ds;
  ds.dir.write(
      "workloads/toy/toy_paged_ps1.jsonl",
      workload_line("u1", 3, 4, 5, blob_input("./blob/workloads/toy/b.safetensors", "kv_indptr")) +
          "\n");
  const Report r = ds.validate();
  EXPECT_FALSE(r.has_errors());
  const auto info = dataset_messages(r, Severity::kInfo);
  ASSERT_FALSE(info.empty());
  EXPECT_EQ(info[0].message,
            "the dataset has no blob/ folder: 1 safetensors inputs of 1 workloads are not present "
            "here (upstream "
            "distributes blobs separately from the JSON)");
}

TEST(ValidateRules, MissingBlobWhenTheBlobFolderExists) {
  Dataset ds;
  ds.dir.write("blob/workloads/toy/other.safetensors", safetensors_i32("x", {0}));
  ds.dir.write(
      "workloads/toy/toy_paged_ps1.jsonl",
      workload_line("u1", 3, 4, 5, blob_input("./blob/workloads/toy/b.safetensors", "kv_indptr")) +
          "\n");
  const auto e = messages(ds.validate(), Check::kLayout, Severity::kError);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].message, "blob file './blob/workloads/toy/b.safetensors' does not exist");
  EXPECT_EQ(e[0].path, "$.workload.inputs.kv_indptr.path");
}

TEST(ValidateRules, LfsPointerBlobIsAWarning) {
  Dataset ds;
  ds.dir.write("blob/b.safetensors",
               "version https://git-lfs.github.com/spec/v1\noid sha256:abc123\nsize 1234\n");
  ds.dir.write(
      "workloads/toy/toy_paged_ps1.jsonl",
      workload_line("u1", 3, 4, 5, blob_input("./blob/b.safetensors", "kv_indptr")) + "\n");
  const auto w = messages(ds.validate(), Check::kLayout, Severity::kWarning);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].message,
            "blob './blob/b.safetensors' is a Git LFS pointer (sha256:abc123, 1234 bytes), not the "
            "data; run `git "
            "lfs pull --include \"blob/b.safetensors\"` in the dataset root");
}

TEST(ValidateRules, BlobKeyDtypeShapeAndDataAreChecked) {
  Dataset ds;
  ds.dir.write("blob/a.safetensors", safetensors_i32("kv_indptr", {0, 1, 3, 5}));
  ds.dir.write("blob/b.safetensors", safetensors_i32("something_else", {0, 1, 3, 5}));
  ds.dir.write("blob/c.safetensors", safetensors_i32("kv_indptr", {0, 1, 3, 5}, "I32"));
  ds.dir.write("blob/d.safetensors", safetensors_i32("kv_indptr", {0, 1, 3, 7}));
  std::string lines;
  lines += workload_line("ok", 3, 4, 5, blob_input("./blob/a.safetensors", "kv_indptr")) + "\n";
  lines += workload_line("key", 3, 4, 5, blob_input("./blob/b.safetensors", "kv_indptr")) + "\n";
  lines += workload_line("shape", 2, 3, 5, blob_input("./blob/c.safetensors", "kv_indptr")) + "\n";
  lines += workload_line("data", 3, 4, 5, blob_input("./blob/d.safetensors", "kv_indptr")) + "\n";
  ds.dir.write("workloads/toy/toy_paged_ps1.jsonl", lines);
  const Report r = ds.validate();
  const auto e = messages(r, Check::kWorkload, Severity::kError);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].message, "./blob/b.safetensors has no tensor 'kv_indptr'");
  EXPECT_EQ(e[0].hint, "it holds: something_else");
  EXPECT_EQ(
      e[1].message,
      "tensor 'kv_indptr' in ./blob/c.safetensors has shape [4] but the workload's axes give [3]");
  EXPECT_EQ(e[2].message,
            "blob data violates constraint 'num_kv_indices == kv_indptr[-1].item()': "
            "num_kv_indices (5) == "
            "kv_indptr[-1].item() (7)");
  EXPECT_EQ(messages(r, Check::kWorkload, Severity::kInfo)[0].message, "1 of 4 workloads valid");
}

TEST(ValidateRules, BlobDtypeMismatch) {
  Dataset ds;
  ds.dir.write("blob/a.safetensors", safetensors_i32("kv_indptr", {0, 1, 3, 5}, "F32"));
  ds.dir.write("workloads/toy/toy_paged_ps1.jsonl",
               workload_line("u", 3, 4, 5, blob_input("./blob/a.safetensors", "kv_indptr")) + "\n");
  const auto e = messages(ds.validate(), Check::kWorkload, Severity::kError);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].message,
            "tensor 'kv_indptr' in ./blob/a.safetensors is F32 but the definition wants int32");
}

TEST(ValidateRules, RecordsOfAnUnknownDefinition) {
  Dataset ds;
  std::string w = workload_line("u1", 3, 4, 5);
  w.replace(w.find("toy_paged_ps1"), 13, "toy_paged_ps2");
  ds.dir.write("workloads/toy/toy_paged_ps2.jsonl", w + "\n");
  const Report r = ds.validate();
  const auto e = dataset_messages(r, Severity::kError);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].message,
            "workloads refer to definition 'toy_paged_ps2', which is not in the dataset");
  EXPECT_EQ(e[0].hint, "did you mean 'toy_paged_ps1'?");
  EXPECT_TRUE(r.has_errors());
}

TEST(ValidateRules, StrayFileIsAWarning) {
  Dataset ds;
  ds.dir.write("definitions/toy/notes.txt", "hello");
  const auto w = dataset_messages(ds.validate(), Severity::kWarning);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].message, "stray file ignored: not a record file of the dataset layout");
  EXPECT_EQ(w[0].file, "definitions/toy/notes.txt");
}

TEST(ValidateRules, UnparseableDefinitionIsReportedUnderItsName) {
  TempDir dir;
  dir.write("definitions/toy/broken.json",
            R"({"name": "broken", "op_type": "toy", "axes": {}, "inputs": {},
    "outputs": {"y": {"shape": [], "dtype": "float33"}}, "reference": "def run():\n  pass\n"})");
  const Report r = validate_dataset(TraceSet::load(dir.path()), {});
  ASSERT_EQ(r.definitions.size(), 1u);
  EXPECT_EQ(r.definitions[0].name, "broken");
  EXPECT_EQ(r.definitions[0].status, Status::kError);
  const auto e = messages(r, Check::kDefinition, Severity::kError);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].message, "unknown dtype 'float33'");
  EXPECT_EQ(e[0].path, "$.outputs.y.dtype");
  EXPECT_EQ(e[0].hint, "did you mean 'float32'?");
}

TEST(ValidateRules, TraceChecks) {
  Dataset ds;
  ds.dir.write("workloads/toy/toy_paged_ps1.jsonl",
               workload_line("u1", 3, 4, 5) + "\n" + workload_line("u2", 3, 4, 5) + "\n");
  ds.dir.write("solutions/baseline/toy/toy_paged_ps1/toy_base.json", kSolution);
  ds.dir.write("traces/baseline/toy/toy_paged_ps1.jsonl",
               trace_line("toy_base", "u1") + "\n" + trace_line("toy_bass", "u1") + "\n" +
                   trace_line("toy_base", "u3", "RUNTIME_ERROR") + "\n");
  const Report r = ds.validate();
  const auto e = messages(r, Check::kTrace, Severity::kError);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].message, "trace names solution 'toy_bass', which is not in the dataset");
  EXPECT_EQ(e[0].hint, "did you mean 'toy_base'?");
  EXPECT_EQ(e[0].file, "traces/baseline/toy/toy_paged_ps1.jsonl:2");
  const auto w = messages(r, Check::kTrace, Severity::kWarning);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].message, "trace's workload u3 is not among the definition's workloads");
  // The baseline passed on u1 only, and failed once.
  const auto b = messages(r, Check::kBaseline, Severity::kWarning);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].message, "1 baseline trace(s) did not pass");
  EXPECT_EQ(b[1].message, "the baseline passed on 1 of 2 workloads; comparisons need all");
}

TEST(ValidateRules, CoverageAndMissingBaseline) {
  Dataset ds;
  ds.dir.write("workloads/toy/toy_paged_ps1.jsonl",
               workload_line("u1", 3, 4, 5) + "\n" + workload_line("u2", 3, 4, 5) + "\n");
  std::string sol = kSolution;
  sol.replace(sol.find(R"("baseline")"), 10, R"("alice")");
  ds.dir.write("solutions/alice/toy/toy_paged_ps1/toy_base.json", sol);
  ds.dir.write("traces/alice/toy/toy_paged_ps1.jsonl", trace_line("toy_base", "u1") + "\n");
  const Report r = ds.validate();
  const auto w = messages(r, Check::kTrace, Severity::kWarning);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].message, "author 'alice' has traces for 1 of the 2 workloads");
  const auto b = messages(r, Check::kBaseline, Severity::kWarning);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].message, "no baseline solution (author 'baseline')");
  EXPECT_EQ(b[0].hint, "add one under solutions/baseline/toy/toy_paged_ps1/");
}

TEST(ValidateRules, SolutionAtTheWrongPathAndLanguageMismatch) {
  Dataset ds;
  std::string sol = kSolution;
  sol.replace(sol.find("main.cpp::run"), 13, "main.py::run");
  sol.replace(sol.find(R"("path": "main.cpp")"), 18, R"("path": "main.py")");
  ds.dir.write("solutions/someone/toy/toy_paged_ps1/toy_base.json", sol);
  const Report r = ds.validate();
  EXPECT_TRUE(messages(r, Check::kLayout, Severity::kError).empty());
  const auto l = messages(r, Check::kLayout, Severity::kWarning);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].message,
            "solution 'toy_base' (author 'baseline') is stored at "
            "solutions/someone/toy/toy_paged_ps1/toy_base.json, "
            "expected solutions/baseline/toy/toy_paged_ps1/toy_base.json");
  const auto w = messages(r, Check::kSolution, Severity::kWarning);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].message,
            "solution 'toy_base' is cpp but its entry file 'main.py' has extension '.py'");
}

TEST(ValidateRules, ChecksCanBeSelected) {
  Dataset ds;
  ds.dir.write("workloads/toy/toy_paged_ps1.jsonl", workload_line("u1", 3, 5, 5) + "\n");
  Options opt;
  opt.checks = {Check::kLayout};
  const Report r = ds.validate(opt);
  EXPECT_FALSE(r.has_errors());
  EXPECT_FALSE(r.definitions[0].at(Check::kWorkload).ran);
  EXPECT_EQ(report_to_json(r)["definitions"]["toy_paged_ps1"]["workload"], Json(nullptr));
}

TEST(ValidateRules, ReportFromJsonRejectsBadInput) {
  Diagnostics diag;
  ReadContext ctx{"r.json", &diag};
  const Json j =
      Json::parse(R"({"config": {"dataset": "d"}, "definitions": {"x": {"status": "fine"}}})");
  EXPECT_FALSE(report_from_json(j, ctx));
  ASSERT_EQ(diag.size(), 1u);
  EXPECT_EQ(diag.items()[0].path, "$.definitions.x.status");
  EXPECT_EQ(diag.items()[0].message, "expected ok, warning or error");
}

}  // namespace
}  // namespace fib::validate
