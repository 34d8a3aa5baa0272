// End to end: fib workloads synth, fib inputs and fib reference on a copy of the example.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fib/tensor/safetensors.h"
#include "fib/trace/json_reader.h"
#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

struct ExampleCopy {
  TempDir dir;
  fs::path root = dir.path() / "dataset";
  ExampleCopy() { copy_tree(source_dir() / "examples/dataset", root); }
  std::size_t lines(const std::string& rel) const {
    const std::string text = TempDir::read_file(root / rel);
    return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  }
};

TEST(WorkloadsCli, SynthAppendsValidWorkloads) {
  ExampleCopy ex;
  const std::string file = "workloads/gemm/gemm_n2048_k2048.jsonl";
  const std::size_t before = ex.lines(file);
  auto dry = run_fib({"workloads", "synth", "--dataset", ex.root.string(), "--definition",
                      "gemm_n2048_k2048", "--count", "3", "--preset", "prefill", "--seed", "9",
                      "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("would add "));
  EXPECT_EQ(ex.lines(file), before);
  auto r = run_fib({"workloads", "synth", "--dataset", ex.root.string(), "--definition",
                    "gemm_n2048_k2048", "--count", "3", "--preset", "prefill", "--seed", "9"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ex.lines(file), before + 3);
  // The dry run printed exactly what was then added (same seed).
  std::string dry_lines = dry.out, real_lines = r.out;
  for (auto* s : {&dry_lines}) {
    std::size_t p;
    while ((p = s->find("would add ")) != std::string::npos) s->replace(p, 10, "added ");
  }
  EXPECT_EQ(dry_lines, real_lines);
  const auto v = run_fib({"validate", "--dataset", ex.root.string()});
  EXPECT_EQ(v.exit_code, 0) << v.out;
}

TEST(WorkloadsCli, UnknownDefinitionSuggests) {
  ExampleCopy ex;
  auto r = run_fib(
      {"workloads", "synth", "--dataset", ex.root.string(), "--definition", "gemm_n2048_k2049"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(
      r.err,
      HasSubstr("no definition named 'gemm_n2048_k2049' (did you mean 'gemm_n2048_k2048'?)"));
}

TEST(InputsAndReferenceCli, MaterializeThenRunTheReference) {
  ExampleCopy ex;
  const std::string uuid = "ef4086fe-aa45-4748-97a2-5b82af2b8cad";  // gemm M=8 in the example
  const auto in = ex.dir.path() / "in.safetensors";
  const auto out = ex.dir.path() / "out.safetensors";
  auto r = run_fib({"inputs", "--dataset", ex.root.string(), "--definition", "gemm_n2048_k2048",
                    "--workload", uuid, "--output", in.string(), "--seed", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote 2 tensors and 0 scalars of gemm_n2048_k2048 workload " + uuid +
                       " (seed 4, input synthesis 2) to " + in.string() + "\n");
  const auto inputs = SafetensorsFile::open(in);
  const auto& meta = inputs.header().metadata;
  EXPECT_NE(std::find(meta.begin(), meta.end(),
                      std::pair<std::string, std::string>{"fib.input_synthesis", "2"}),
            meta.end());
  EXPECT_EQ(inputs.read("A").shape(), (Shape{8, 2048}));
  EXPECT_EQ(inputs.read("B").shape(), (Shape{2048, 2048}));
  r = run_fib({"reference", "--dataset", ex.root.string(), "--definition", "gemm_n2048_k2048",
               "--inputs", in.string(), "--output", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("gemm_n2048_k2048: native reference gemm on cpu in "));
  const auto outputs = SafetensorsFile::open(out);
  const Tensor c = outputs.read("C");
  EXPECT_EQ(c.shape(), (Shape{8, 2048}));
  EXPECT_EQ(c.dtype(), DType::kFloat16);
}

// A corpus workload names blobs the corpus does not carry: --write-blobs writes fib's synthesized
// tensors there, under their tensor keys, and later reads find them (no "not present" note).
TEST(InputsAndReferenceCli, WriteBlobsWritesTheMissingBlobsOthersThenRead) {
  FIB_REQUIRE_CORPUS(corpus);
  TempDir dir;
  const std::string def = "gqa_paged_decode_h32_kv8_d128_ps1";
  const auto root = dir.path() / "ds";
  std::filesystem::create_directories(root / "definitions" / "gqa_paged");
  std::filesystem::create_directories(root / "workloads" / "gqa_paged");
  std::filesystem::copy_file(corpus / "definitions" / "gqa_paged" / (def + ".json"),
                             root / "definitions" / "gqa_paged" / (def + ".json"));
  std::string line;
  std::getline(std::ifstream(corpus / "workloads" / "gqa_paged" / (def + ".jsonl")), line);
  std::ofstream(root / "workloads" / "gqa_paged" / (def + ".jsonl")) << line << "\n";
  const std::string uuid = Json::parse(line).at("workload").at("uuid").get<std::string>();
  const std::string blob =
      Json::parse(line).at("workload").at("inputs").at("kv_indices").at("path").get<std::string>();
  ASSERT_FALSE(std::filesystem::exists(root / blob));
  auto r = run_fib({"inputs", "--dataset", root.string(), "--definition", def, "--workload", uuid,
                    "--write-blobs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote blob "));
  ASSERT_TRUE(std::filesystem::exists(root / blob));
  const auto written = SafetensorsFile::open(root / blob);
  EXPECT_EQ(written.read("kv_indptr").dtype(), DType::kInt32);
  EXPECT_EQ(written.read("kv_indptr").shape(), (Shape{2}));
  const auto in = dir.path() / "in.safetensors";
  r = run_fib({"inputs", "--dataset", root.string(), "--definition", def, "--workload", uuid,
               "--output", in.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("not present")));
  const Tensor indices = SafetensorsFile::open(in).read("kv_indices");
  const Tensor blob_indices = written.read("kv_indices");
  ASSERT_EQ(indices.nbytes(), blob_indices.nbytes());
  EXPECT_EQ(std::memcmp(indices.raw(), blob_indices.raw(), indices.nbytes()), 0);
  // Without --output and without --write-blobs there is nothing to do.
  r = run_fib({"inputs", "--dataset", root.string(), "--definition", def, "--workload", uuid});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(InputsAndReferenceCli, UnknownWorkload) {
  ExampleCopy ex;
  auto r = run_fib({"inputs", "--dataset", ex.root.string(), "--definition", "gemm_n2048_k2048",
                    "--workload", "nope", "--output", (ex.dir.path() / "x.safetensors").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("gemm_n2048_k2048: error: no workload with uuid 'nope'"));
}

}  // namespace
}  // namespace fib::testing
