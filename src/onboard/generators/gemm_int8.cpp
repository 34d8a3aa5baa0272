// op_type gemm_int8: sgl-kernel's int8_scaled_mm (W8A8 int8 checkpoints): int8 operands, a
// float32 scale per token of mat_a and per output channel of mat_b, exact integer accumulation,
// bf16 output. One definition per (N, K).
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition gemm_int8(const GemmInt8Kernel& k, const GenContext& ctx) {
  const std::string what = k.role.empty() ? std::string() : fmt::format(" {}", k.role);
  std::string description = fmt::format(
      "INT8 scaled GEMM (sgl-kernel int8_scaled_mm) out = (mat_a @ mat_b.T) * scales_a[:, None] * "
      "scales_b[None, :] for{} "
      "(N={}, K={}{}), bf16 output. {}",
      what, k.n, k.k, k.tp > 0 ? fmt::format(", per rank at TP={}", k.tp) : std::string(),
      provenance(ctx));
  Builder b(name_of(k), "gemm_int8", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("quantization:int8");
  if (k.tp > 0) b.tag(fmt::format("tp:{}", k.tp));
  b.var("M", "Number of rows of mat_a (tokens).")
      .constant("N", k.n, "Output features.")
      .constant("K", k.k, "Input features (reduction dimension).");
  b.input("mat_a", {"M", "K"}, DType::kInt8, "Activations, quantized per token.")
      .input("mat_b", {"N", "K"}, DType::kInt8,
             "Weight, [out_features, in_features], quantized per output channel.")
      .input("scales_a", {"M"}, DType::kFloat32, "Dequantization scale of each row of mat_a.")
      .input("scales_b", {"N"}, DType::kFloat32, "Dequantization scale of each row of mat_b.");
  b.output("out", {"M", "N"}, DType::kBFloat16, "The scaled integer product.");
  b.reference(fill(templates::gemm_int8, {{"N", std::to_string(k.n)}, {"K", std::to_string(k.k)}}));
  return b.build();
}

std::string name_of(const GemmInt8Kernel& k) {
  return fmt::format("int8_scaled_mm_n{}_k{}", k.n, k.k);
}

}  // namespace fib::onboard::gen
