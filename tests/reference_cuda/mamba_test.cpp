// CUDA mamba_ssu against the CPU reference: every corpus definition on synthesized inputs (a
// batch of one, a batch in a larger cache), edge cases (PAD slots, two rows on one slot, which
// chain through the rounded state), a slot past the cache, a batch of 300 rows whose slots repeat
// up to eight times, other state dtypes and dstate sizes (the vector and the element-wise paths),
// and a full-size timing with its outputs checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

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

void scale(Tensor& t, double f) {
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, t.get(i) * f);
}

// Runs both references on synthesized inputs with the given slots and checks: every output
// within kChainTol; the new_state of each slot no row names equal to the CPU's, bit for bit (a
// copy, or a conversion when the dtypes differ); PAD rows' outputs exactly 0. x is scaled by
// 0.05 and state by 0.5, so that states stay below 0.5 along chains of up to eight rows (0.39 at
// most here), where one bfloat16 ulp is within kChainTol.
void expect_chains_match(const Definition& def, std::int64_t cache,
                         const std::vector<std::int64_t>& slots, std::uint64_t seed,
                         const std::string& what) {
  const auto batch = static_cast<std::int64_t>(slots.size());
  const AxisValues axes = {{"batch_size", batch}, {"state_cache_size", cache}};
  reference::Arguments args = synthesized_arguments(def, axes, seed);
  args.tensors["state_batch_indices"] = int32_tensor(slots);
  scale(args.tensors.at("x"), 0.05);
  scale(args.tensors.at("state"), 0.5);
  const auto gpu = expect_same_outputs(def, axes, args, kChainTol, what);
  const auto cpu = reference::run(def, axes, args);
  const Tensor& gs = gpu.at("new_state");
  const Tensor& cs = cpu.at("new_state");
  ASSERT_EQ(gs.numel(), cs.numel()) << what;
  const std::int64_t slot_size = gs.numel() / cache;
  int untouched = 0;
  for (std::int64_t slot = 0; slot < cache; ++slot) {
    if (std::find(slots.begin(), slots.end(), slot) != slots.end()) continue;
    ++untouched;
    for (std::int64_t i = slot * slot_size; i < (slot + 1) * slot_size; ++i)
      ASSERT_EQ(gs.get(i), cs.get(i)) << what << ": slot " << slot << " element " << i;
  }
  EXPECT_GT(untouched, 0) << what;
  const Tensor& out = gpu.at("output");
  const std::int64_t row_size = out.numel() / batch;
  for (std::int64_t b = 0; b < batch; ++b) {
    if (slots[static_cast<std::size_t>(b)] >= 0) continue;
    for (std::int64_t i = b * row_size; i < (b + 1) * row_size; ++i)
      ASSERT_EQ(out.get(i), 0.0) << what << ": PAD row " << b;
  }
}

// Definition `def` with other sizes and the state's (and new_state's) dtypes.
Definition variant(const Definition& def, const std::map<std::string, std::int64_t>& sizes,
                   DType state, DType new_state) {
  Definition d = scaled_definition(def, sizes);
  for (auto& in : d.inputs)
    if (in.name == "state") in.dtype = state;
  for (auto& out : d.outputs)
    if (out.name == "new_state") out.dtype = new_state;
  return d;
}

TEST(CudaReferenceMamba, LargeBatchWithRepeatedSlots) {
  // 300 batch rows (more than a block's 256 threads scan at once) over 37 of 40 slots, every
  // seventh row PAD: each slot is named by 6 to 8 rows, which must chain in batch order, also
  // across the 256-row boundary. 16 [dstate] rows per slot: partial tiles in both kernels.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      variant(corpus_definition(corpus, "mamba_ssu", "mamba_ssu_decode_h64_d64_s128_ng4"),
              {{"nheads", 4}, {"head_dim", 4}, {"ngroups", 2}}, DType::kBFloat16, DType::kBFloat16);
  std::vector<std::int64_t> slots;
  for (std::int64_t b = 0; b < 300; ++b) slots.push_back(b % 7 == 3 ? -1 : (b * 13) % 37);
  expect_chains_match(def, 40, slots, 91, "batch 300");
}

TEST(CudaReferenceMamba, OtherStateDtypesAndSizes) {
  // float32 and float16 states (4- and 8-element vectors), a float32 state written to a
  // bfloat16 new_state (element-wise, converted on the first read and in the copy), dstate 20
  // (not a whole number of vectors: element-wise) and 384 (48 vectors for a row's 32
  // threads: some take two). Rows 1 and 4 share slot 2, row 3 is PAD.
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition base =
      corpus_definition(corpus, "mamba_ssu", "mamba_ssu_decode_h64_d64_s128_ng4");
  const std::map<std::string, std::int64_t> small = {
      {"nheads", 6}, {"head_dim", 8}, {"ngroups", 3}};
  struct Case {
    std::string what;
    std::int64_t dstate;
    DType state, new_state;
  };
  const std::vector<Case> cases = {
      {"float32 state", 128, DType::kFloat32, DType::kFloat32},
      {"float16 state", 128, DType::kFloat16, DType::kFloat16},
      {"float32 state to bfloat16", 128, DType::kFloat32, DType::kBFloat16},
      {"dstate 20", 20, DType::kBFloat16, DType::kBFloat16},
      {"dstate 384", 384, DType::kBFloat16, DType::kBFloat16},
  };
  std::uint64_t seed = 120;
  for (const Case& c : cases) {
    auto sizes = small;
    sizes["dstate"] = c.dstate;
    expect_chains_match(variant(base, sizes, c.state, c.new_state), 6, {0, 2, 5, -1, 2}, ++seed,
                        c.what);
  }
}

TEST(CudaReferenceMamba, FullSizeWorkloadTakesWellUnderASecond) {
  // Timed, then its outputs on synthesized inputs checked against the CPU reference on the whole
  // shape (~5e8 state updates, seconds on the CPU; the 512 rows name distinct slots of the 1024,
  // so kTol holds: no row chains on another's rounded state).
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "mamba_ssu", "mamba_ssu_decode_h128_d64_s128_ng8");
  const AxisValues axes = {{"batch_size", 512}, {"state_cache_size", 1024}};
  EXPECT_LT(time_full_size(def, axes, 0x3c), 1.0);
  expect_full_size_matches_cpu(def, axes, 750, kTol);
}

}  // namespace
}  // namespace fib::testing
