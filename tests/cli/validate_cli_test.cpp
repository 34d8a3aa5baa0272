// End to end: `fib validate` and `fib validate-render` as a user runs them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(ValidateCli, VersionFlag) {
  const auto r = run_fib({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "0.1.0\n");
}

// No errors; its only warnings are the baseline check's (see ExampleDataset.Validates).
TEST(ValidateCli, BundledExampleHasNoErrors) {
  const auto r = run_fib({"validate", "--dataset", (source_dir() / "examples/dataset").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr(" 0 error\n0 errors, "));
}

// A dataset laid out as upstream's own example is (definitions/<name>.json, solutions/<name>.json,
// workloads/<definition>.jsonl) loads and validates: its paths are warnings, not errors.
TEST(ValidateCli, UpstreamsFlatLayoutExitsZero) {
  TempDir dir;
  const fs::path example = source_dir() / "examples/dataset";
  const std::string def = "rmsnorm_h2048";
  dir.write("definitions/" + def + ".json",
            TempDir::read_file(example / "definitions/rmsnorm" / (def + ".json")));
  dir.write("workloads/" + def + ".jsonl",
            TempDir::read_file(example / "workloads/rmsnorm" / (def + ".jsonl")));
  dir.write("solutions/naive.json", TempDir::read_file(example / "solutions/fib-examples/rmsnorm" /
                                                       def / (def + "_naive.json")));
  const auto r = run_fib({"validate", "--dataset", dir.path().string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("0 errors, "));
  EXPECT_THAT(r.out, HasSubstr("[warning] definitions/rmsnorm_h2048.json: definition "
                               "'rmsnorm_h2048' of op_type 'rmsnorm' is stored at "
                               "definitions/rmsnorm_h2048.json, expected "
                               "definitions/rmsnorm/rmsnorm_h2048.json"));
  EXPECT_THAT(r.out, HasSubstr("2 workloads of 'rmsnorm_h2048' (the first: "));
  EXPECT_THAT(r.out, HasSubstr("solution 'rmsnorm_h2048_naive' (author 'fib-examples') is stored "
                               "at solutions/naive.json"));
}

TEST(ValidateCli, CorpusHasErrorsAndExitsOne) {
  FIB_REQUIRE_CORPUS(corpus);
  const auto r = run_fib({"validate", "--dataset", corpus.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("136 definitions: "));
  EXPECT_THAT(
      r.out,
      HasSubstr("--- trtllm_fp8_per_tensor_scale_moe_topk1_e16_h5120_i8192 (moe) [error] ---"));
  EXPECT_THAT(
      r.out,
      HasSubstr(
          "[error] definitions/moe/trtllm_fp8_per_tensor_scale_moe_topk1_e16_h5120_i8192.json: "
          "$.reference: run() takes its parameters in a different order"));
}

TEST(ValidateCli, SelectingCleanDefinitionsExitsZero) {
  FIB_REQUIRE_CORPUS(corpus);
  const auto r = run_fib({"validate", "--dataset", corpus.string(), "--op-types", "gemm"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("24 definitions: 24 ok, 0 warning, 0 error"));
}

TEST(ValidateCli, DatasetFromEnvironment) {
  const auto r =
      run_fib({"validate"}, {"FIB_DATASET_PATH=" + (source_dir() / "examples/dataset").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(ValidateCli, MissingDatasetIsAUsageError) {
  const auto r = run_fib({"validate", "--dataset", "/nonexistent/fib-dataset"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "fib: /nonexistent/fib-dataset: error: dataset folder does not exist (check the path; "
            "fib never "
            "creates a missing dataset)\n");
  EXPECT_FALSE(fs::exists("/nonexistent/fib-dataset"));
}

TEST(ValidateCli, NoDatasetAtAll) {
  const auto r = run_fib({"validate"}, {"FIB_DATASET_PATH="});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fib validate: no dataset given (use --dataset DIR or set FIB_DATASET_PATH)\n");
}

TEST(ValidateCli, UnknownCheckSuggestsTheClosest) {
  const auto r = run_fib({"validate", "--dataset", (source_dir() / "examples/dataset").string(),
                          "--checks", "layuot"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "fib validate: unknown check 'layuot' (did you mean 'layout'?)\n");
}

TEST(ValidateCli, JsonReportRendersBackToTheSameText) {
  TempDir out;
  const auto r = run_fib({"validate", "--dataset", (source_dir() / "examples/dataset").string(),
                          "--output-folder", out.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::path json, text;
  for (const auto& e : fs::directory_iterator(out.path())) {
    if (e.path().extension() == ".json") json = e.path();
    if (e.path().extension() == ".txt") text = e.path();
  }
  ASSERT_FALSE(json.empty());
  ASSERT_FALSE(text.empty());
  const auto rendered = run_fib({"validate-render", json.string()});
  EXPECT_EQ(rendered.exit_code, 0);
  EXPECT_EQ(rendered.out, r.out);
  EXPECT_EQ(out.read(text.filename().string()), r.out);
}

TEST(ValidateCli, RenderRejectsAMalformedReport) {
  TempDir dir;
  const auto p = dir.write(
      "r.json", R"({"config": {"dataset": "x"}, "definitions": {"a": {"status": "great"}}})");
  const auto r = run_fib({"validate-render", p.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, p.string() + ": $.definitions.a.status: error: expected ok, warning or error\n");
}

}  // namespace
}  // namespace fib::testing

namespace fib::testing {
namespace {

// Malformed JSON, wrong types, a lying safetensors header, a huge file and a symlink loop in one
// dataset: each gives its own message, and fib exits 1 instead of crashing.
TEST(ValidateCli, BadInputNeverCrashes) {
  TempDir ds;
  ds.write("definitions/gemm/broken_json.json",
           "{\"name\": \"broken_json\",\n  \"op_type\": gemm}\n");
  ds.write(
      "definitions/gemm/wrong_types.json",
      R"({"name": "wrong_types", "op_type": "gemm", "axes": {"M": {"type": "var"}}, "inputs": {"A": {"shape": "M", "dtype": "float16"}},
               "outputs": {"C": {"shape": ["M"], "dtype": "float16"}}, "reference": "def run(A):\n    return A\n"})");
  ds.write(
      "definitions/gemm/ok.json",
      R"({"name": "ok", "op_type": "gemm", "axes": {"M": {"type": "var"}}, "inputs": {"A": {"shape": ["M"], "dtype": "int32"}},
               "outputs": {"C": {"shape": ["M"], "dtype": "int32"}}, "reference": "def run(A):\n    return A\n"})");
  // A header that claims 1000 bytes in a 20-byte file.
  std::string lying(8, '\0');
  lying[0] = static_cast<char>(0xE8);
  lying[1] = 0x03;
  lying += "{\"A\": {}}   ";
  ds.write("blob/lying.safetensors", lying);
  ds.write(
      "workloads/gemm/ok.jsonl",
      R"({"definition": "ok", "solution": null, "workload": {"uuid": "u1", "axes": {"M": 3}, "inputs": {"A": {"type": "safetensors", "path": "./blob/lying.safetensors", "tensor_key": "A"}}}, "evaluation": null})"
      "\n");
  // A 300 MB definition file (sparse, so the test stays fast).
  {
    const fs::path huge = ds.path() / "definitions/gemm/huge.json";
    ds.write("definitions/gemm/huge.json", "");
    fs::resize_file(huge, std::uintmax_t{300} << 20);
  }
  fs::create_directory_symlink("..", ds.path() / "definitions/gemm/loop");

  const auto r = run_fib({"validate", "--dataset", ds.path().string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(
      r.out,
      HasSubstr("[error] definitions/gemm/broken_json.json: line 2, column 14: invalid JSON: "
                "syntax error while parsing value - invalid literal; last read: '\"op_type\": g'"));
  EXPECT_THAT(
      r.out,
      HasSubstr("[error] definitions/gemm/wrong_types.json: $.inputs.A.shape: expected an array of "
                "strings, found string \"M\""));
  EXPECT_THAT(
      r.out,
      HasSubstr("[error] definitions/gemm/huge.json: file is 314572800 bytes, larger than the "
                "268435456 byte limit"));
  EXPECT_THAT(
      r.out,
      HasSubstr(
          "[error] definitions/gemm/loop: symbolic link loop: this folder was already visited"));
  EXPECT_THAT(r.out, HasSubstr("5 definitions: 0 ok, 0 warning, 5 error\n"));
  EXPECT_THAT(
      r.out,
      HasSubstr(
          "[error] workloads/gemm/ok.jsonl:1: $.workload.inputs.A.path: ./blob/lying.safetensors "
          "is not a valid safetensors file: header length 1000 runs past the end of the "
          "20-byte file"));
}

}  // namespace
}  // namespace fib::testing
