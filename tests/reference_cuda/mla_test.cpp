// CUDA mla_paged (decode and causal prefill, page sizes 1 and 64) and mla_ragged against the CPU
// reference: every corpus definition on synthesized inputs (short and long sequences), edge
// cases (empty sequences, a partial last page, causal rows that see no key), inputs the CPU
// reference rejects, and full-size timings with their outputs checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>

#include "reference/attention_test_util.h"
#include "reference_cuda/attention_parity_util.h"

namespace fib::testing {
namespace {

// As for gqa: fp32 on both sides (576-term logits as one sum here, two added sums on the CPU;
// 512-wide weighted sums of the latent cache) and one bfloat16 rounding, so at most one bfloat16
// ulp (2^-7 relative) of the output apart, and a few 1e-6 of the lse.
const std::map<std::string, ParityTolerance> kTol = {{"output", {1e-5, 8e-3}},
                                                     {"lse", {1e-4, 1e-5}}};

std::int64_t const_value(const Definition& def, const char* axis) {
  const Axis* a = def.axis(axis);
  return a && a->value ? *a->value : -1;
}

TEST(CudaReferenceMla, EveryCorpusPagedDefinitionMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  int definitions = 0, calls = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions" / "mla_paged")) {
    const Definition def = load_definition(e.path().string());
    const std::int64_t ps = const_value(def, "page_size");
    std::vector<std::map<std::string, std::int64_t>> configs;
    if (def.input("qo_indptr") != nullptr) {
      const std::int64_t pages = ps == 1 ? 400 : 9;
      configs.push_back({{"len_indptr", 4},
                         {"batch_size", 3},
                         {"total_q", 150},
                         {"num_kv_indices", pages},
                         {"num_pages", pages + 5}});
      configs.push_back({{"len_indptr", 2},
                         {"batch_size", 1},
                         {"total_q", 1},
                         {"num_kv_indices", ps == 1 ? 1200 : 20},
                         {"num_pages", ps == 1 ? 1300 : 24}});
    } else {
      configs.push_back({{"batch_size", 1},
                         {"len_indptr", 2},
                         {"num_kv_indices", ps == 1 ? 2000 : 33},
                         {"num_pages", ps == 1 ? 2100 : 40}});
      configs.push_back({{"batch_size", 6},
                         {"len_indptr", 7},
                         {"num_kv_indices", ps == 1 ? 500 : 14},
                         {"num_pages", ps == 1 ? 600 : 20}});
    }
    for (const auto& c : configs) {
      const std::string id = expect_cuda_matches_cpu(def, var_axes_in(def, c),
                                                     300 + static_cast<std::uint64_t>(calls), kTol);
      EXPECT_EQ(id, "cuda:mla_paged") << def.name;
      ++calls;
    }
    ++definitions;
  }
  EXPECT_GE(definitions, 6);
}

TEST(CudaReferenceMla, EveryCorpusRaggedDefinitionMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  int definitions = 0, calls = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions" / "mla_ragged")) {
    const Definition def = load_definition(e.path().string());
    for (const auto& c :
         std::vector<AxisValues>{{{"len_indptr", 4}, {"total_q", 260}, {"total_kv", 300}},
                                 {{"len_indptr", 2}, {"total_q", 2}, {"total_kv", 700}},
                                 {{"len_indptr", 3}, {"total_q", 1100}, {"total_kv", 1100}}}) {
      const std::string id =
          expect_cuda_matches_cpu(def, c, 400 + static_cast<std::uint64_t>(calls), kTol);
      EXPECT_EQ(id, "cuda:mla_ragged") << def.name;
      ++calls;
    }
    ++definitions;
  }
  EXPECT_GE(definitions, 2);
}

TEST(CudaReferenceMla, LongPrefillTakesTheOneSplitPath) {
  // 16 heads on one latent head: 2 tokens a tile, so 1200 queries make 600 tiles, past 4 x the
  // SMs of an H100 or H200 (no key split).
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "mla_paged", "mla_paged_prefill_causal_h16_ckv512_kpe64_ps64");
  expect_cuda_matches_cpu(def,
                          var_axes_in(def, {{"len_indptr", 3},
                                            {"batch_size", 2},
                                            {"total_q", 1200},
                                            {"num_kv_indices", 24},
                                            {"num_pages", 30}}),
                          9, kTol);
}

TEST(CudaReferenceMla, HeadDimsThatAreNotMultiplesOfEight) {
  // head_dim_ckv 500 and head_dim_kpe 20: the latent and rope parts meet inside an 8-element
  // group (element-wise loads), and output columns past 500 are masked.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  for (const char* name : {"mla_paged_decode_h16_ckv512_kpe64_ps64",
                           "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1"}) {
    const Definition def = scaled_definition(corpus_definition(corpus, "mla_paged", name),
                                             {{"head_dim_ckv", 500}, {"head_dim_kpe", 20}});
    const bool prefill = def.input("qo_indptr") != nullptr;
    const std::map<std::string, std::int64_t> axes =
        prefill
            ? std::map<std::string, std::int64_t>{{"len_indptr", 3},
                                                  {"total_q", 90},
                                                  {"num_kv_indices", 300},
                                                  {"num_pages", 320}}
            : std::map<std::string, std::int64_t>{
                  {"batch_size", 3}, {"len_indptr", 4}, {"num_kv_indices", 9}, {"num_pages", 12}};
    EXPECT_EQ(expect_cuda_matches_cpu(def, var_axes_in(def, axes), 45, kTol), "cuda:mla_paged");
  }
}

TEST(CudaReferenceMla, EdgeCases) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const double inf = std::numeric_limits<double>::infinity();
  // Decode, page size 64: a partial last page, an empty sequence, a single key.
  const Definition decode =
      corpus_definition(corpus, "mla_paged", "mla_paged_decode_h16_ckv512_kpe64_ps64");
  const AxisValues axes = {
      {"batch_size", 3}, {"num_pages", 8}, {"len_indptr", 4}, {"num_kv_indices", 4}};
  reference::Arguments args = synthesized_arguments(decode, axes, 41);
  args.tensors["kv_indptr"] = int32_tensor({0, 3, 3, 4});
  args.tensors["kv_indices"] = int32_tensor({6, 1, 3, 7});
  args.tensors["kv_last_page_len"] = int32_tensor({5, 64, 1});
  auto gpu = expect_same_outputs(decode, axes, args, kTol, "edge decode");
  EXPECT_EQ(gpu.at("lse").get(16), -inf);  // sequence 1 has no keys
  EXPECT_EQ(gpu.at("output").get(16 * 512), 0.0);

  // Ragged prefill where one sequence has more queries than keys (its first rows see nothing),
  // and rows past the last sequence.
  const Definition ragged =
      corpus_definition(corpus, "mla_ragged", "mla_ragged_prefill_causal_h8_qk192_vo128");
  const AxisValues rax = {{"len_indptr", 3}, {"total_q", 12}, {"total_kv", 9}};
  reference::Arguments rargs = synthesized_arguments(ragged, rax, 42);
  rargs.tensors["qo_indptr"] = int32_tensor({0, 5, 10});
  rargs.tensors["kv_indptr"] = int32_tensor({0, 2, 9});
  gpu = expect_same_outputs(ragged, rax, rargs, kTol, "edge ragged");
  for (std::int64_t row : {0, 1, 2, 10, 11}) EXPECT_EQ(gpu.at("lse").get(row * 8), -inf) << row;
  EXPECT_NE(gpu.at("lse").get(3 * 8), -inf);
}

TEST(CudaReferenceMla, RejectedIndicesPoisonTheOutputs) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "mla_paged", "mla_paged_decode_h16_ckv512_kpe64_ps64");
  const AxisValues axes = {
      {"batch_size", 2}, {"num_pages", 8}, {"len_indptr", 3}, {"num_kv_indices", 4}};
  reference::Arguments args = synthesized_arguments(def, axes, 43);
  args.tensors["kv_indptr"] = int32_tensor({0, 2, 4});
  args.tensors["kv_indices"] = int32_tensor({0, 1, 2, 3});
  args.tensors["kv_last_page_len"] = int32_tensor({65, 3});  // past page_size
  EXPECT_THROW(reference::run(def, axes, args), Error);
  const auto gpu = run_cuda(def, axes, args);
  EXPECT_TRUE(all_poisoned(gpu.at("output")));
  EXPECT_TRUE(all_poisoned(gpu.at("lse")));
}

TEST(CudaReferenceMla, FullSizeWorkloadsTakeWellUnderASecond) {
  // The largest shapes of the corpus's mla_paged workloads (a ~1M-page cache): each timed, then
  // its outputs on synthesized inputs checked against the CPU reference. The decode whole (~1e9
  // multiply-adds); the 16k-token single-sequence prefill (~2e12 multiply-adds, minutes on the CPU)
  // on its last 32 query rows, the ones that see every key.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition decode =
      corpus_definition(corpus, "mla_paged", "mla_paged_decode_h16_ckv512_kpe64_ps1");
  const AxisValues decode_axes = {
      {"batch_size", 64}, {"num_pages", 989669}, {"len_indptr", 65}, {"num_kv_indices", 75145}};
  EXPECT_LT(time_full_size(decode, decode_axes, 0x3c), 1.0);
  expect_full_size_matches_cpu(decode, decode_axes, 450, kTol);
  const Definition prefill =
      corpus_definition(corpus, "mla_paged", "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1");
  const AxisValues prefill_axes = {
      {"total_q", 16384}, {"num_pages", 989669}, {"len_indptr", 2}, {"num_kv_indices", 16387}};
  EXPECT_LT(time_full_size(prefill, prefill_axes, 0x3c), 1.0);
  expect_last_query_rows_match_cpu(prefill, prefill_axes, 32, 451, kTol);
}

}  // namespace
}  // namespace fib::testing
