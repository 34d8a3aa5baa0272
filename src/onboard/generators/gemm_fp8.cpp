// op_type gemm_fp8: out = dequant(a) @ dequant(b).T in bf16 from fp8 e4m3 operands, one
// definition per (N, K) and scaling. Block scales (DeepSeek V3's fp8 checkpoints: 1x128
// activation groups from per_token_group_quant_fp8, 128x128 weight blocks) are FlashInfer's
// gemm_fp8_nt_groupwise; per-tensor scales are sgl-kernel's fp8_scaled_mm. Names use the full
// projection shape unless --gemm-shapes per-rank, as gemm's do.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

namespace {

constexpr std::int64_t kBlock = 128;

std::string shape_note(const GemmFp8Kernel& k) {
  const std::string what = k.role.empty() ? std::string() : fmt::format(" {}", k.role);
  return fmt::format("{} (N={}, K={}{})", what, k.n, k.k,
                     k.tp > 0 ? fmt::format(", per rank at TP={}", k.tp) : std::string());
}

void block_scaled(Builder& b, const GemmFp8Kernel& k) {
  b.tag("fi_api:flashinfer.gemm.gemm_fp8_nt_groupwise");
  b.var("M", "Number of rows of a (tokens).")
      .constant("N", k.n, "Output features.")
      .constant("K", k.k, "Input features (reduction dimension).")
      .constant("K_div_block", k.k / kBlock, "K / 128: scale blocks along K.")
      .constant("N_div_block", (k.n + kBlock - 1) / kBlock,
                "ceil(N / 128): weight scale blocks along N.");
  b.input("a", {"M", "K"}, DType::kFloat8E4M3FN, "Activations, quantized per 1x128 group.")
      .input("b", {"N", "K"}, DType::kFloat8E4M3FN,
             "Weight, [out_features, in_features], quantized per 128x128 block.")
      .input("a_scale", {"M", "K_div_block"}, DType::kFloat32,
             "Dequantization scale of each 1x128 group of a.")
      .input("b_scale", {"N_div_block", "K_div_block"}, DType::kFloat32,
             "Dequantization scale of each 128x128 block of b.");
  b.output("out", {"M", "N"}, DType::kBFloat16, "dequant(a) @ dequant(b).T.");
  b.reference(
      fill(templates::gemm_fp8_block, {{"N", std::to_string(k.n)}, {"K", std::to_string(k.k)}}));
}

void per_tensor(Builder& b, const GemmFp8Kernel& k) {
  b.var("M", "Number of rows of mat_a (tokens).")
      .constant("N", k.n, "Output features.")
      .constant("K", k.k, "Input features (reduction dimension).");
  b.input("mat_a", {"M", "K"}, DType::kFloat8E4M3FN, "Activations, quantized per tensor.")
      .input("mat_b", {"N", "K"}, DType::kFloat8E4M3FN,
             "Weight, [out_features, in_features], quantized per tensor.")
      .scalar("scales_a", DType::kFloat32, "Dequantization scale of mat_a.")
      .scalar("scales_b", DType::kFloat32, "Dequantization scale of mat_b.");
  b.output("out", {"M", "N"}, DType::kBFloat16, "dequant(mat_a) @ dequant(mat_b).T.");
  b.reference(fill(templates::gemm_fp8_per_tensor,
                   {{"N", std::to_string(k.n)}, {"K", std::to_string(k.k)}}));
}

}  // namespace

Definition gemm_fp8(const GemmFp8Kernel& k, const GenContext& ctx) {
  const bool block = k.scaling == Fp8Scaling::kBlock;
  std::string description =
      fmt::format("FP8 {} GEMM out = dequant(A) @ dequant(B).T for{}, bf16 output. {}",
                  block ? "block-scale (1x128 activation groups, 128x128 weight blocks)"
                        : "per-tensor scaled (sgl-kernel fp8_scaled_mm)",
                  shape_note(k), provenance(ctx));
  Builder b(name_of(k), "gemm_fp8", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("quantization:float8_e4m3fn");
  if (k.tp > 0) b.tag(fmt::format("tp:{}", k.tp));
  if (block) {
    block_scaled(b, k);
  } else {
    per_tensor(b, k);
  }
  return b.build();
}

std::string name_of(const GemmFp8Kernel& k) {
  return fmt::format("{}_n{}_k{}",
                     k.scaling == Fp8Scaling::kBlock ? "gemm_fp8_nt_groupwise" : "fp8_scaled_mm",
                     k.n, k.k);
}

}  // namespace fib::onboard::gen
