// CUDA gdn (decode, mtp, prefill) against the CPU reference: every corpus definition on
// synthesized inputs, edge cases (a batch of one, a zero-length prefill sequence and rows no
// sequence covers, prefill without an initial state, a negative mtp pool index, an index past
// the pool), and full-size timings with their outputs checked.
#include <gtest/gtest.h>

#include <filesystem>

#include "reference/attention_test_util.h"
#include "reference_cuda/attention_parity_util.h"

namespace fib::testing {
namespace {

// Both sides run the same fp32 recurrence in the same order of operations (the dot products even
// in the CPU's eight-lane order); they differ by fused multiply-adds and the exp/log1p
// implementations, a few fp32 ulps a token that the decaying state does not amplify. The state
// stays within 1e-5 absolute + 1e-4 relative (the CPU-vs-PyTorch bound); the output, rounded
// once to bfloat16, within one bfloat16 ulp (2^-7 relative) plus 1e-5 for values near zero.
const std::map<std::string, ParityTolerance> kTol = {
    {"output", {1e-5, 8e-3}}, {"new_state", {1e-5, 1e-4}}, {"final_state", {1e-5, 1e-4}}};

TEST(CudaReferenceGdn, EveryCorpusDefinitionMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  int definitions = 0, calls = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions" / "gdn")) {
    const Definition def = load_definition(e.path().string());
    std::vector<std::map<std::string, std::int64_t>> configs;
    if (def.input("cu_seqlens") != nullptr) {
      configs.push_back({{"total_seq_len", 90}, {"num_seqs", 3}, {"len_cu_seqlens", 4}});
      configs.push_back({{"total_seq_len", 300}, {"num_seqs", 1}, {"len_cu_seqlens", 2}});
    } else if (def.input("initial_state_indices") != nullptr) {
      configs.push_back({{"batch_size", 3}, {"seq_len", 4}, {"pool_size", 8}});
      configs.push_back({{"batch_size", 1}, {"seq_len", 2}, {"pool_size", 1}});
    } else {
      configs.push_back({{"batch_size", 1}});
      configs.push_back({{"batch_size", 9}});
    }
    for (const auto& c : configs) {
      const std::string id = expect_cuda_matches_cpu(def, var_axes_in(def, c),
                                                     600 + static_cast<std::uint64_t>(calls), kTol);
      EXPECT_EQ(id, "cuda:gdn") << def.name;
      ++calls;
    }
    ++definitions;
  }
  EXPECT_GE(definitions, 9);
}

TEST(CudaReferenceGdn, OtherHeadSizes) {
  // head_size 160 (a state row of up to 256 keys: the wider register layout) and 100 (not a
  // multiple of 8: some threads hold fewer columns), on the corpus's own math.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  for (std::int64_t size : {160, 100}) {
    const Definition prefill = scaled_definition(
        corpus_definition(corpus, "gdn", "gdn_prefill_qk4_v8_d128_k_last"), {{"head_size", size}});
    EXPECT_EQ(expect_cuda_matches_cpu(
                  prefill, {{"total_seq_len", 40}, {"num_seqs", 2}, {"len_cu_seqlens", 3}},
                  static_cast<std::uint64_t>(size), kTol),
              "cuda:gdn");
    const Definition decode = scaled_definition(
        corpus_definition(corpus, "gdn", "gdn_decode_qk4_v8_d128_k_last"), {{"head_size", size}});
    expect_cuda_matches_cpu(decode, {{"batch_size", 3}}, static_cast<std::uint64_t>(size) + 1,
                            kTol);
  }
}

TEST(CudaReferenceGdn, PrefillEdgeCases) {
  // cu_seqlens [3, 10, 10, 25]: rows 0-2 belong to no sequence (output 0), sequence 1 is empty
  // (its new_state is 0), and then the same without the optional initial state (zeros).
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(corpus, "gdn", "gdn_prefill_qk4_v8_d128_k_last");
  const AxisValues axes = {{"total_seq_len", 27}, {"num_seqs", 3}, {"len_cu_seqlens", 4}};
  reference::Arguments args = synthesized_arguments(def, axes, 71);
  Tensor cu(DType::kInt64, {4});
  const std::int64_t offsets[] = {3, 10, 10, 25};
  for (int i = 0; i < 4; ++i) cu.set(i, static_cast<double>(offsets[i]));
  args.tensors["cu_seqlens"] = cu;
  const auto gpu = expect_same_outputs(def, axes, args, kTol, "ragged");
  for (std::int64_t i = 0; i < 3 * 8 * 128; ++i) ASSERT_EQ(gpu.at("output").get(i), 0.0) << i;
  const std::int64_t head_state = 128 * 128;
  for (std::int64_t i = 0; i < 8 * head_state; i += 97)
    ASSERT_EQ(gpu.at("new_state").get(8 * head_state + i), 0.0) << i;

  args.tensors.erase("state");
  expect_same_outputs(def, axes, args, kTol, "no initial state");
}

TEST(CudaReferenceGdn, MtpPoolIndices) {
  // A negative pool index counts from the end (Python indexing, as the reference does); one past
  // the pool is rejected: the CPU reference throws, the CUDA one poisons its outputs with NaN.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(corpus, "gdn", "gdn_mtp_qk8_v16_d128_k_last");
  const AxisValues axes = {{"batch_size", 3}, {"seq_len", 3}, {"pool_size", 5}};
  reference::Arguments args = synthesized_arguments(def, axes, 72);
  args.tensors["initial_state_indices"] = int32_tensor({4, -1, 0});
  expect_same_outputs(def, axes, args, kTol, "negative index");

  args.tensors["initial_state_indices"] = int32_tensor({4, 5, 0});
  EXPECT_THROW(reference::run(def, axes, args), Error);
  const auto bad = run_cuda(def, axes, args);
  EXPECT_TRUE(all_poisoned(bad.at("output")));
  EXPECT_TRUE(all_poisoned(bad.at("final_state")));
}

TEST(CudaReferenceGdn, FullSizeWorkloadsTakeWellUnderASecond) {
  // A 16k-token prefill in one sequence (the recurrence is sequential over tokens) and in 16,
  // and a decode batch of 256: each timed, then its outputs on synthesized inputs checked
  // against the CPU reference on the whole shape (~1e10 multiply-adds, seconds on the CPU; the
  // recurrence leaves no row to sample alone).
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition prefill = corpus_definition(corpus, "gdn", "gdn_prefill_qk16_v32_d128_k_last");
  const AxisValues one = {{"total_seq_len", 16384}, {"num_seqs", 1}, {"len_cu_seqlens", 2}};
  const AxisValues many = {{"total_seq_len", 16384}, {"num_seqs", 16}, {"len_cu_seqlens", 17}};
  EXPECT_LT(time_full_size(prefill, one, 0x3c), 1.0);
  expect_full_size_matches_cpu(prefill, one, 650, kTol);
  EXPECT_LT(time_full_size(prefill, many, 0x3c), 1.0);
  expect_full_size_matches_cpu(prefill, many, 651, kTol);
  const Definition decode = corpus_definition(corpus, "gdn", "gdn_decode_qk16_v32_d128_k_last");
  EXPECT_LT(time_full_size(decode, {{"batch_size", 256}}, 0x3c), 1.0);
  expect_full_size_matches_cpu(decode, {{"batch_size", 256}}, 652, kTol);
}

}  // namespace
}  // namespace fib::testing
