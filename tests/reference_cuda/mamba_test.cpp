// CUDA mamba_ssu against the CPU reference: every corpus definition on synthesized inputs (a
// batch of one, a batch in a larger cache), edge cases (PAD slots, two rows on one slot, which
// chain through the rounded state), a slot past the cache, and a full-size timing.
#include <gtest/gtest.h>

#include <filesystem>

#include "reference/attention_test_util.h"
#include "reference_cuda/attention_parity_util.h"

namespace fib::testing {
namespace {

// fp32 on both sides (dstate-long sums in different orders, fused multiply-adds, CUDA's expf and
// log1pf against the C library's), rounded once to bfloat16: one bfloat16 ulp (2^-7 relative)
// apart next to a rounding boundary, plus 1e-4 for outputs that cancel to near zero (a sum of 128
// products of order 0.1 and 1).
const std::map<std::string, ParityTolerance> kTol = {{"output", {1e-4, 8e-3}},
                                                     {"new_state", {1e-5, 8e-3}}};
// A row that chains on an earlier row's slot starts from a state that may already be one
// bfloat16 ulp apart (<= 2^-9 for the |state| < 0.5 synthesized here); that difference, times
// dA <= 1, is absolute in the new state (which may cancel to near zero) and reaches the output
// through C (|C| < 5).
const std::map<std::string, ParityTolerance> kChainTol = {{"output", {1e-2, 8e-3}},
                                                          {"new_state", {2e-3, 8e-3}}};

TEST(CudaReferenceMamba, EveryCorpusDefinitionMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  int definitions = 0, calls = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions" / "mamba_ssu")) {
    const Definition def = load_definition(e.path().string());
    for (const auto& c : std::vector<AxisValues>{{{"batch_size", 1}, {"state_cache_size", 1}},
                                                 {{"batch_size", 9}, {"state_cache_size", 20}}}) {
      const std::string id =
          expect_cuda_matches_cpu(def, c, 700 + static_cast<std::uint64_t>(calls), kTol);
      EXPECT_EQ(id, "cuda:mamba_ssu") << def.name;
      ++calls;
    }
    ++definitions;
  }
  EXPECT_GE(definitions, 2);
}

TEST(CudaReferenceMamba, PadSlotsAndRepeatedSlots) {
  // Rows 1 and 4 are PAD (-1: skipped, output 0); rows 0 and 3 both update slot 5, so row 3
  // starts from row 0's rounded state; slots nobody names pass through unchanged.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "mamba_ssu", "mamba_ssu_decode_h64_d64_s128_ng4");
  const AxisValues axes = {{"batch_size", 5}, {"state_cache_size", 8}};
  reference::Arguments args = synthesized_arguments(def, axes, 81);
  args.tensors["state_batch_indices"] = int32_tensor({5, -1, 2, 5, -1});
  const auto gpu = expect_same_outputs(def, axes, args, kChainTol, "pad and repeats");
  for (std::int64_t i = 0; i < 64 * 64; ++i) {
    ASSERT_EQ(gpu.at("output").get(64 * 64 + i), 0.0);
    ASSERT_EQ(gpu.at("output").get(4 * 64 * 64 + i), 0.0);
  }
  const Tensor& state = args.tensors.at("state");
  const std::int64_t slot_size = 64 * 64 * 128;
  for (std::int64_t i = 0; i < slot_size; i += 13)
    ASSERT_EQ(gpu.at("new_state").get(7 * slot_size + i), state.get(7 * slot_size + i));

  args.tensors["state_batch_indices"] = int32_tensor({5, -1, 8, 0, -1});
  EXPECT_THROW(reference::run(def, axes, args), Error);
  const auto bad = run_cuda(def, axes, args);
  EXPECT_TRUE(all_poisoned(bad.at("output")));
  EXPECT_TRUE(all_poisoned(bad.at("new_state")));
}

TEST(CudaReferenceMamba, FullSizeWorkloadTakesWellUnderASecond) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "mamba_ssu", "mamba_ssu_decode_h128_d64_s128_ng8");
  EXPECT_LT(time_full_size(def, {{"batch_size", 512}, {"state_cache_size", 1024}}, 0x3c), 1.0);
}

}  // namespace
}  // namespace fib::testing
