// The kernel inventory (`fib models SLUG --kernels`): the engine kernels computing each planned
// definition, calls per forward from the module graph, the kernels a model does not call with
// the configuration that does, and every row of the seeds' DeepSeek inventory accounted for.
#include "fib/onboard/inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "onboard_test_util.h"
#include "support/test_paths.h"

namespace fib::onboard {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

KernelInventory inventory_of(const std::string& slug,
                             std::optional<Quantization> quantization = std::nullopt) {
  BundledModel m = *find_model(testing::bundled(), slug);
  if (quantization) m.quantization = quantization;
  std::string error;
  const auto r = generate_bundled(m, &error);
  EXPECT_TRUE(r) << error;
  return kernel_inventory(*r);
}

std::set<std::string> called(const KernelInventory& inv) {
  std::set<std::string> out;
  for (const auto& r : inv.rows)
    for (const auto* k : r.kernels) out.insert(std::string(k->kernel));
  return out;
}

std::set<std::string> not_called(const KernelInventory& inv) {
  std::set<std::string> out;
  for (const auto& n : inv.not_called) out.insert(std::string(n.kernel->kernel));
  return out;
}

const InventoryRow& row(const KernelInventory& inv, const std::string& definition) {
  for (const auto& r : inv.rows)
    if (r.definition == definition) return r;
  throw std::runtime_error("no row " + definition);
}

// The kernel column of the seeds' DeepSeek summary table.
std::vector<std::string> seed_kernels(const fs::path& seeds) {
  std::vector<std::string> kernels;
  for (const auto& entry : fs::directory_iterator(seeds)) {
    std::ifstream in(entry.path());
    std::string line;
    std::getline(in, line);
    if (line != "# DeepSeek Kernel Traces") continue;
    bool table = false;
    while (std::getline(in, line)) {
      if (line.starts_with("| Kernel |")) {
        table = true;
      } else if (table && line.starts_with("|--")) {
        continue;
      } else if (table && line.starts_with("| ")) {
        kernels.push_back(line.substr(2, line.find(" |", 2) - 2));
      } else if (table) {
        break;
      }
    }
  }
  return kernels;
}

TEST(KernelInventory, DeepSeekV3RowsNameTheirEngineKernelsAndCallsPerForward) {
  const auto inv = inventory_of("deepseek-v3");
  EXPECT_EQ(inv.rows.size(), 46u);
  const auto& decode = row(inv, "mla_paged_decode_h16_ckv512_kpe64_ps64");
  EXPECT_EQ(decode.category, "Attention");
  EXPECT_EQ(decode.calls_per_forward, 61);
  std::vector<std::string> kernels;
  for (const auto* k : decode.kernels) kernels.push_back(std::string(k->kernel));
  EXPECT_EQ(kernels,
            (std::vector<std::string>{"cutlass_mla_decode", "trtllm_batch_decode_with_kv_cache_mla",
                                      "BatchMLAPagedAttentionWrapper", "decode_attention_kernel"}));
  // Every layer's post-attention norm and the 60 input norms after the first, and the final one.
  EXPECT_EQ(row(inv, "fused_add_rmsnorm_h7168").calls_per_forward, 123);
  // The shared experts' (58 layers) and the dense MLPs' (3) gate_up input, the MoE experts' input
  // and every layer's fused_qkv_a input.
  EXPECT_EQ(row(inv, "per_token_group_quant_fp8_k7168_g128").calls_per_forward, 180);
  EXPECT_EQ(row(inv, "moe_fused_gate_e256_k8_ng8_kg4").category, "MoE TopK");
  EXPECT_EQ(row(inv, "embedding_v129280_h7168").calls_per_forward, 1);
  // Every layer writes its compressed kv and k_pe rows into its paged caches.
  const auto& append = row(inv, "append_paged_mla_kv_cache_ckv512_kpe64");
  EXPECT_EQ(append.category, "KV cache");
  EXPECT_EQ(append.calls_per_forward, 61);
  kernels.clear();
  for (const auto* k : append.kernels) kernels.push_back(std::string(k->kernel));
  EXPECT_EQ(kernels,
            (std::vector<std::string>{"set_mla_kv_buffer_triton", "append_paged_mla_kv_cache"}));
}

TEST(KernelInventory, AKernelNotCalledSaysWhichConfigurationCallsIt) {
  const auto inv = inventory_of("deepseek-v3");
  for (const auto& n : inv.not_called) {
    EXPECT_EQ(called(inv).count(std::string(n.kernel->kernel)), 0u) << n.kernel->kernel;
    EXPECT_THAT(n.reason, HasSubstr("runs with")) << n.kernel->kernel;
  }
  const auto missing = not_called(inv);
  EXPECT_TRUE(missing.count("fp8_scaled_mm"));
  EXPECT_TRUE(missing.count("topk_softmax"));
  EXPECT_FALSE(missing.count("decode_attention_kernel"));  // called for MLA decode
}

TEST(KernelInventory, TheServingConfigurationDecidesWhichKernelsRun) {
  EXPECT_TRUE(
      called(inventory_of("deepseek-v3", Quantization::kFp8PerTensor)).count("fp8_scaled_mm"));
  EXPECT_TRUE(called(inventory_of("deepseek-v3", Quantization::kInt8)).count("int8_scaled_mm"));
  EXPECT_FALSE(called(inventory_of("deepseek-v3", Quantization::kNone))
                   .count("sgl_per_token_group_quant_fp8"));
  EXPECT_TRUE(called(inventory_of("deepseek-v2-lite")).count("topk_softmax"));
  EXPECT_TRUE(called(inventory_of("deepseek-v3.2")).count("hadamard_transform"));
  EXPECT_TRUE(called(inventory_of("llama-3.1-8b")).count("BatchDecodeWithPagedKVCacheWrapper"));
}

TEST(KernelInventory, EverySeedDeepSeekKernelIsCalledOrItsConfigurationSaid) {
  const auto shared = fib::testing::shared_dir();
  if (!shared || !fs::exists(*shared / "seeds"))
    GTEST_SKIP() << "SKIPPED: ../shared/seeds is absent (set FIB_SHARED_DIR)";
  const auto seeds = seed_kernels(*shared / "seeds");
  ASSERT_EQ(seeds.size(), 28u);
  const auto inv = inventory_of("deepseek-v3");
  const auto yes = called(inv), no = not_called(inv);
  std::set<std::string> unaccounted, absent;
  for (const auto& k : seeds) {
    if (yes.count(k)) continue;
    if (no.count(k)) {
      absent.insert(k);
    } else {
      unaccounted.insert(k);
    }
  }
  EXPECT_TRUE(unaccounted.empty()) << ::testing::PrintToString(unaccounted);
  // DeepSeek-V3 at its serving setup (fp8 block scales, sigmoid grouped routing, SwiGLU, no
  // sparse attention) runs all but these; the other configurations run them (test above).
  EXPECT_EQ(absent,
            (std::set<std::string>{"cutlass_scaled_fp4_mm", "fp8_scaled_mm", "gelu_and_mul",
                                   "hadamard_transform", "int8_scaled_mm", "scaled_fp4_quant",
                                   "sgl_per_token_quant_fp8", "topk_softmax"}));
}

TEST(KernelInventory, TextAndJsonCarryTheSameRows) {
  const auto inv = inventory_of("llama-3.1-8b");
  const Json j = inventory_to_json(inv);
  ASSERT_EQ(j["kernels"].size(), inv.rows.size());
  EXPECT_EQ(j["kernels"][0]["category"], inv.rows[0].category);
  const std::string text = render_inventory_text(inv);
  for (const auto& r : inv.rows) EXPECT_THAT(text, HasSubstr(r.op_type + "/" + r.definition));
  EXPECT_THAT(text, HasSubstr("cutlass_mla_decode (sgl-kernel): runs with MLA attention"));
}

}  // namespace
}  // namespace fib::onboard
