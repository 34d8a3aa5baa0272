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

}  // namespace
}  // namespace fib::testing
