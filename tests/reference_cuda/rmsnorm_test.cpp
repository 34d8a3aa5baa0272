// CUDA rmsnorm / fused_add_rmsnorm against the CPU reference, on the corpus's definitions.
#include <gtest/gtest.h>

#include "reference_cuda/parity_util.h"

namespace fib::testing {
namespace {

TEST(CudaReferenceRmsNorm, EveryCorpusRmsNormMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  const auto corpus = corpus_dir();
  if (!corpus) GTEST_SKIP() << "needs ../shared/corpus";
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(*corpus / "definitions" / "rmsnorm")) {
    const Definition def = load_definition(e.path().string());
    for (std::int64_t batch : {1, 7, 300}) {
      // bf16 outputs: the two summation orders may round one element to the neighbouring bf16.
      const std::string id =
          expect_cuda_matches_cpu(def, {{"batch_size", batch}},
                                  11 + static_cast<std::uint64_t>(batch), {{"*", {1e-2, 8e-3}}});
      EXPECT_EQ(id, "cuda:rmsnorm") << def.name;
    }
    ++checked;
  }
  EXPECT_GT(checked, 3);
}

// A corpus definition with another hidden_size and every tensor's dtype replaced by `dtype`, but
// the weight's by `weight_dtype`.
Definition variant(const Definition& def, std::int64_t hidden, const std::string& dtype,
                   const std::string& weight_dtype) {
  return edited_definition(def, [&](Json& j) {
    j["axes"]["hidden_size"]["value"] = hidden;
    for (auto& [name, spec] : j["inputs"].items())
      spec["dtype"] = name == "weight" ? weight_dtype : dtype;
    j["outputs"]["output"]["dtype"] = dtype;
  });
}

// Both sides of the vectorized kernel's conditions (one 2-byte dtype for every tensor, rows of
// whole 16-byte groups, at most 16,384 elements), each launch configuration of it, with and
// without the residual: every case agrees with the CPU.
TEST(CudaReferenceRmsNorm, VectorizedAndGenericShapesAgreeWithTheCpu) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  struct Case {
    std::int64_t hidden;
    const char* dtype;
    const char* weight;
  };
  // fp16 and fp32 outputs round closer than bf16; one tolerance that admits a bf16 neighbour
  // still fails a wrong row, scale or weight.
  for (const char* name : {"rmsnorm_h128", "fused_add_rmsnorm_h2048"}) {
    const Definition base = corpus_definition(corpus, "rmsnorm", name);
    for (const Case& c : {Case{1001, "bfloat16", "bfloat16"},   // not whole groups: generic
                          Case{2048, "float16", "float16"},     // vectorized, 128 x 2
                          Case{4096, "bfloat16", "bfloat16"},   // 128 x 4
                          Case{7168, "bfloat16", "bfloat16"},   // 128 x 8: 896 groups, 7 per thread
                          Case{16384, "float16", "float16"},    // 256 x 8
                          Case{16392, "bfloat16", "bfloat16"},  // longer: generic
                          Case{2048, "float32", "float32"},     // generic
                          Case{2048, "bfloat16", "float32"}}) {  // mixed dtypes: generic
      const Definition def = variant(base, c.hidden, c.dtype, c.weight);
      EXPECT_EQ(
          expect_cuda_matches_cpu(def, {{"batch_size", 5}}, static_cast<std::uint64_t>(c.hidden),
                                  {{"*", {1e-2, 8e-3}}}),
          "cuda:rmsnorm")
          << name << " " << c.hidden << " " << c.dtype << " weight " << c.weight;
    }
  }
}

}  // namespace
}  // namespace fib::testing
