// CUDA gqa_paged (decode and causal prefill, page sizes 1 and 64) and gqa_ragged against the CPU
// reference: every corpus definition on synthesized inputs (short and long sequences, so both
// the split-keys decode path and the one-split prefill path run), hand-made edge cases (empty
// sequences, partial and zero-length last pages, rows no sequence covers, causal rows that see
// no key), inputs the CPU reference rejects, and full-size timings with their outputs checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "reference/attention_test_util.h"
#include "reference_cuda/attention_parity_util.h"

namespace fib::testing {
namespace {

// Both sides compute in fp32 and round once to bfloat16; only the summation orders differ (dot
// products, the softmax sum, and normalizing before or after the weighted sum of V: about 1e-6
// relative), which moves a bfloat16 output by at most one ulp (2^-7 of its magnitude) next to a
// rounding boundary, and the fp32 lse (magnitude < 20) by a few 1e-6.
const std::map<std::string, ParityTolerance> kTol = {{"output", {1e-5, 8e-3}},
                                                     {"lse", {1e-4, 1e-5}}};

std::int64_t const_value(const Definition& def, const char* axis) {
  const Axis* a = def.axis(axis);
  return a && a->value ? *a->value : -1;
}

TEST(CudaReferenceGqa, EveryCorpusPagedDefinitionMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  int definitions = 0, calls = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions" / "gqa_paged")) {
    const Definition def = load_definition(e.path().string());
    const std::int64_t ps = const_value(def, "page_size");
    const bool prefill = def.input("qo_indptr") != nullptr;
    std::vector<std::map<std::string, std::int64_t>> configs;
    if (prefill) {
      // Three sequences; queries never outnumber their keys in the synthesized split.
      const std::int64_t pages = ps == 1 ? 500 : 12;
      configs.push_back({{"len_indptr", 4},
                         {"batch_size", 3},
                         {"total_q", 200},
                         {"num_kv_indices", pages},
                         {"num_pages", pages + 7}});
      // One sequence, one query on many keys: the keys are split over blocks.
      configs.push_back({{"len_indptr", 2},
                         {"batch_size", 1},
                         {"total_q", 1},
                         {"num_kv_indices", ps == 1 ? 1500 : 25},
                         {"num_pages", ps == 1 ? 1600 : 30}});
    } else {
      // A batch of one long sequence (many key tiles, split over blocks), and a batch of seven.
      configs.push_back({{"batch_size", 1},
                         {"len_indptr", 2},
                         {"num_kv_indices", ps == 1 ? 2500 : 40},
                         {"num_pages", ps == 1 ? 2600 : 45}});
      configs.push_back({{"batch_size", 7},
                         {"len_indptr", 8},
                         {"num_kv_indices", ps == 1 ? 600 : 21},
                         {"num_pages", ps == 1 ? 700 : 30}});
    }
    for (const auto& c : configs) {
      const std::string id = expect_cuda_matches_cpu(def, var_axes_in(def, c),
                                                     100 + static_cast<std::uint64_t>(calls), kTol);
      EXPECT_EQ(id, "cuda:gqa_paged") << def.name;
      ++calls;
    }
    ++definitions;
  }
  EXPECT_GE(definitions, 29);
}

TEST(CudaReferenceGqa, EveryCorpusRaggedDefinitionMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  int definitions = 0, calls = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions" / "gqa_ragged")) {
    const Definition def = load_definition(e.path().string());
    for (const auto& c :
         std::vector<AxisValues>{{{"len_indptr", 4}, {"total_q", 300}, {"total_kv", 420}},
                                 {{"len_indptr", 2}, {"total_q", 1}, {"total_kv", 900}}}) {
      const std::string id =
          expect_cuda_matches_cpu(def, c, 200 + static_cast<std::uint64_t>(calls), kTol);
      EXPECT_EQ(id, "cuda:gqa_ragged") << def.name;
      ++calls;
    }
    ++definitions;
  }
  EXPECT_GE(definitions, 7);
}

TEST(CudaReferenceGqa, LongPrefillsTakeTheOneSplitPath) {
  // Enough query tiles that no key split is made (8 query heads a kv head: 8 tokens a tile, so
  // 2100 / 8 * 4 kv heads > 1000 tiles, past 4 x the SMs of an H100 or H200).
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition ragged =
      corpus_definition(corpus, "gqa_ragged", "gqa_ragged_prefill_causal_h32_kv4_d128");
  expect_cuda_matches_cpu(ragged, {{"len_indptr", 3}, {"total_q", 2100}, {"total_kv", 2100}}, 7,
                          kTol);
  const Definition paged =
      corpus_definition(corpus, "gqa_paged", "gqa_paged_prefill_causal_h32_kv4_d128_ps64");
  expect_cuda_matches_cpu(paged,
                          var_axes_in(paged, {{"len_indptr", 4},
                                              {"batch_size", 3},
                                              {"total_q", 1600},
                                              {"num_kv_indices", 30},
                                              {"num_pages", 34}}),
                          8, kTol);
}

// A gqa_ragged definition of other dtypes and head dims than the corpus has (the CPU reference
// takes bfloat16, float16 and float32 of any head dim).
Definition ragged_definition(const std::string& dtype, const std::string& out_dtype,
                             std::int64_t head_dim) {
  const std::string t = R"({"shape": ["total_q", "num_qo_heads", "head_dim"], "dtype": ")";
  const std::string kv = R"({"shape": ["total_kv", "num_kv_heads", "head_dim"], "dtype": ")";
  return inline_definition(
      R"({"name": "gqa_ragged_prefill_causal_)" + dtype + "_d" + std::to_string(head_dim) +
      R"(", "op_type": "gqa_ragged",
    "axes": {"num_qo_heads": {"type": "const", "value": 6}, "num_kv_heads": {"type": "const", "value": 2},
      "head_dim": {"type": "const", "value": )" +
      std::to_string(head_dim) + R"(}, "len_indptr": {"type": "var"},
      "total_q": {"type": "var"}, "total_kv": {"type": "var"}},
    "inputs": {"q": )" +
      t + dtype + R"("}, "k": )" + kv + dtype + R"("}, "v": )" + kv + dtype + R"("},
      "qo_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
      "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
      "sm_scale": {"shape": null, "dtype": "float32"}},
    "outputs": {"output": )" +
      t + out_dtype + R"("}, "lse": {"shape": ["total_q", "num_qo_heads"], "dtype": "float32"}},
    "reference": "def run(q, k, v, qo_indptr, kv_indptr, sm_scale):\n    pass\n"})");
}

TEST(CudaReferenceGqa, OtherDtypesAndHeadDims) {
  // float16 operands with head_dim 20 (not a multiple of 8: element-wise loads, and output
  // columns past the head dim masked), and float32 operands with head_dim 64. Tolerances: one
  // float16 ulp (2^-10 relative) of a float16 output; a float32 output carries the summation
  // orders' difference itself, about 1e-6 relative.
  FIB_REQUIRE_GPU();
  const AxisValues axes = {{"len_indptr", 4}, {"total_q", 150}, {"total_kv", 200}};
  const Definition f16 = ragged_definition("float16", "float16", 20);
  expect_cuda_matches_cpu(f16, axes, 91, {{"output", {1e-5, 1e-3}}, {"lse", {1e-4, 1e-5}}});
  const Definition f32 = ragged_definition("float32", "float32", 64);
  expect_cuda_matches_cpu(f32, axes, 92, {{"output", {1e-6, 1e-5}}, {"lse", {1e-4, 1e-5}}});
  // bfloat16 operands with head_dim 128 run on the tensor cores (attention_mma.cu); with a
  // float32 output the comparison sees their fp32 arithmetic itself: P @ V with P rounded to
  // bfloat16 (2^-9) instead of split into three terms would be off by about 1e-3, 100x this
  // tolerance. One split (many tiles) and several (one query row, 900 keys).
  const Definition mma = ragged_definition("bfloat16", "float32", 128);
  expect_cuda_matches_cpu(mma, {{"len_indptr", 5}, {"total_q", 700}, {"total_kv", 900}}, 94,
                          {{"output", {1e-6, 1e-5}}, {"lse", {1e-4, 1e-5}}});
  expect_cuda_matches_cpu(mma, {{"len_indptr", 2}, {"total_q", 1}, {"total_kv", 900}}, 95,
                          {{"output", {1e-6, 1e-5}}, {"lse", {1e-4, 1e-5}}});
  const Definition odd = ragged_definition("bfloat16", "bfloat16", 36);
  EXPECT_EQ(expect_cuda_matches_cpu(odd, {{"len_indptr", 2}, {"total_q", 1}, {"total_kv", 500}}, 93,
                                    kTol),
            "cuda:gqa_ragged");
}

TEST(CudaReferenceGqa, DecodeEdgeCases) {
  // Page size 64, kv_last_page_len shaped [batch_size]: a partial last page, an empty sequence,
  // a full last page, a last page of length 0 (it adds nothing, as the CPU reference accepts),
  // and a batch of one.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "gqa_paged", "gqa_paged_decode_h32_kv8_d128_ps64");
  const AxisValues axes = {
      {"batch_size", 4}, {"num_pages", 12}, {"len_indptr", 5}, {"num_kv_indices", 6}};
  reference::Arguments args = synthesized_arguments(def, axes, 31);
  args.tensors["kv_indptr"] = int32_tensor({0, 3, 3, 4, 6});
  args.tensors["kv_indices"] = int32_tensor({7, 2, 9, 0, 11, 5});
  args.tensors["kv_last_page_len"] = int32_tensor({1, 17, 64, 0});
  const auto gpu = expect_same_outputs(def, axes, args, kTol, "edge pages");
  const double inf = std::numeric_limits<double>::infinity();
  for (std::int64_t h = 0; h < 32; ++h) {
    EXPECT_EQ(gpu.at("lse").get(1 * 32 + h), -inf) << "the empty sequence";
    EXPECT_EQ(gpu.at("output").get((1 * 32 + h) * 128), 0.0);
  }

  const AxisValues one = {
      {"batch_size", 1}, {"num_pages", 3}, {"len_indptr", 2}, {"num_kv_indices", 1}};
  reference::Arguments single = synthesized_arguments(def, one, 32);
  single.tensors["kv_indptr"] = int32_tensor({0, 1});
  single.tensors["kv_indices"] = int32_tensor({2});
  single.tensors["kv_last_page_len"] = int32_tensor({1});  // a single key: output = its value
  expect_same_outputs(def, one, single, kTol, "one key");
}

TEST(CudaReferenceGqa, PrefillEdgeCases) {
  // Page size 64, kv_last_page_len shaped [len_indptr]. Rows 0-1 and 9 belong to no sequence;
  // sequence 0 has 3 queries on 2 keys (its first query sees nothing); sequence 1 has no
  // queries; sequence 2 has 3 queries on 128 keys; sequence 3 has 1 query and no pages.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "gqa_paged", "gqa_paged_prefill_causal_h16_kv1_d128_ps64");
  const AxisValues axes = {
      {"len_indptr", 5}, {"total_q", 10}, {"num_kv_indices", 4}, {"num_pages", 6}};
  reference::Arguments args = synthesized_arguments(def, axes, 33);
  args.tensors["qo_indptr"] = int32_tensor({2, 5, 5, 8, 9});
  args.tensors["kv_indptr"] = int32_tensor({0, 1, 2, 4, 4});
  args.tensors["kv_indices"] = int32_tensor({3, 1, 5, 0});
  args.tensors["kv_last_page_len"] = int32_tensor({2, 9, 64, 1, 1});
  const auto gpu = expect_same_outputs(def, axes, args, kTol, "edge prefill");
  const double inf = std::numeric_limits<double>::infinity();
  for (std::int64_t row : {0, 1, 2, 8, 9}) {  // uncovered, masked, and key-less rows
    EXPECT_EQ(gpu.at("lse").get(row * 16), -inf) << "row " << row;
    EXPECT_EQ(gpu.at("output").get(row * 16 * 128 + 5), 0.0) << "row " << row;
  }
  EXPECT_NE(gpu.at("lse").get(3 * 16), -inf);
}

TEST(CudaReferenceGqa, RejectedIndicesPoisonTheOutputs) {
  // A page id past the cache and a decreasing indptr: the CPU reference throws; the CUDA one
  // must not read out of bounds, and answers with NaN everywhere.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "gqa_paged", "gqa_paged_decode_h32_kv8_d128_ps1");
  const AxisValues axes = {
      {"batch_size", 2}, {"num_pages", 50}, {"len_indptr", 3}, {"num_kv_indices", 40}};
  reference::Arguments args = synthesized_arguments(def, axes, 34);
  Tensor bad = args.tensors.at("kv_indices").clone();
  bad.set(17, 50);
  args.tensors["kv_indices"] = bad;
  EXPECT_THROW(reference::run(def, axes, args), Error);
  auto gpu = run_cuda(def, axes, args);
  EXPECT_TRUE(all_poisoned(gpu.at("output")));
  EXPECT_TRUE(all_poisoned(gpu.at("lse")));

  args = synthesized_arguments(def, axes, 35);
  args.tensors["kv_indptr"] = int32_tensor({0, 30, 20});
  EXPECT_THROW(reference::run(def, axes, args), Error);
  gpu = run_cuda(def, axes, args);
  EXPECT_TRUE(all_poisoned(gpu.at("output")));
}

TEST(CudaReferenceGqa, FullSizeWorkloadsTakeWellUnderASecond) {
  // The largest shapes of the corpus's gqa workloads, and a 16k-token single-sequence prefill:
  // each timed, then its outputs on synthesized inputs checked against the CPU reference. Whole
  // where the CPU reference takes seconds (~1e11 multiply-adds at most, the 33 sequences of
  // random lengths); the single 16k-token sequence (~1e12, minutes on the CPU) on its last 64
  // query rows, the ones that see every key.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition decode =
      corpus_definition(corpus, "gqa_paged", "gqa_paged_decode_h32_kv4_d128_ps1");
  const AxisValues decode_batch = {
      {"batch_size", 64}, {"num_pages", 61535}, {"len_indptr", 65}, {"num_kv_indices", 61519}};
  const AxisValues decode_one = {
      {"batch_size", 1}, {"num_pages", 61535}, {"len_indptr", 2}, {"num_kv_indices", 61519}};
  EXPECT_LT(time_full_size(decode, decode_batch, 0x3c), 1.0);
  expect_full_size_matches_cpu(decode, decode_batch, 250, kTol);
  EXPECT_LT(time_full_size(decode, decode_one, 0x3c), 1.0);
  expect_full_size_matches_cpu(decode, decode_one, 251, kTol);
  const Definition paged =
      corpus_definition(corpus, "gqa_paged", "gqa_paged_prefill_causal_h32_kv8_d128_ps1");
  const AxisValues paged_axes = {
      {"len_indptr", 18}, {"total_q", 3478}, {"num_kv_indices", 2560}, {"num_pages", 716370}};
  EXPECT_LT(time_full_size(paged, paged_axes, 0x3c), 1.0);
  expect_full_size_matches_cpu(paged, paged_axes, 252, kTol);
  const Definition ragged =
      corpus_definition(corpus, "gqa_ragged", "gqa_ragged_prefill_causal_h32_kv4_d128");
  const AxisValues ragged_many = {{"len_indptr", 34}, {"total_q", 16294}, {"total_kv", 16294}};
  const AxisValues ragged_one = {{"len_indptr", 2}, {"total_q", 16384}, {"total_kv", 16384}};
  EXPECT_LT(time_full_size(ragged, ragged_many, 0x3c), 1.0);
  expect_full_size_matches_cpu(ragged, ragged_many, 253, kTol);
  EXPECT_LT(time_full_size(ragged, ragged_one, 0x3c), 1.0);
  expect_last_query_rows_match_cpu(ragged, ragged_one, 64, 254, kTol);
}

}  // namespace
}  // namespace fib::testing
