// op_type quantization: activations quantized to fp8 e4m3 for the fp8 GEMMs, as FlashInfer files
// its quantize kernels. per_token_group_quant_fp8_k{K}_g{G} (sgl-kernel's
// sgl_per_token_group_quant_fp8; group 128 feeds the block-scale GEMM) gives one scale per group
// of G values of a row; per_token_quant_fp8_k{K} (sgl_per_token_quant_fp8) one per row;
// per_tensor_quant_fp8_k{K} (sgl_per_tensor_quant_fp8, dynamic) one for the whole tensor. A scale
// is the group's absolute maximum (at least 1e-10) over 448, the largest finite e4m3 value.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

namespace {

Definition per_tensor(const QuantizationKernel& k, const GenContext& ctx, const std::string& what) {
  Builder b(name_of(k), "quantization",
            fmt::format("Per-tensor FP8 quantization with a dynamic scale (sgl-kernel "
                        "sgl_per_tensor_quant_fp8) of bf16 activations, K={}, one scale for the "
                        "whole tensor: scale = max(amax, 1e-10) / 448, q = clamp(x / scale) as "
                        "float8_e4m3fn{}. {}",
                        k.k, what, provenance(ctx)));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("quantization:float8_e4m3fn");
  b.var("M", "Number of rows (tokens).").constant("K", k.k, "Row length.");
  b.constant("one", 1, "The scale's single element.");
  b.input("input", {"M", "K"}, DType::kBFloat16, "Activations.");
  b.output("output_q", {"M", "K"}, DType::kFloat8E4M3FN, "Quantized activations.");
  b.output("output_s", {"one"}, DType::kFloat32, "Dequantization scale of the tensor.");
  b.reference(fill(templates::quantization_per_tensor_fp8, {{"K", std::to_string(k.k)}}));
  return b.build();
}

}  // namespace

Definition quantization(const QuantizationKernel& k, const GenContext& ctx) {
  const bool group = k.kind == QuantKind::kPerTokenGroupFp8;
  const std::string what = k.role.empty() ? std::string() : fmt::format(" ({})", k.role);
  if (k.kind == QuantKind::kPerTensorFp8) return per_tensor(k, ctx, what);
  std::string description =
      group ? fmt::format(
                  "Per-token-group FP8 quantization (sgl-kernel sgl_per_token_group_quant_fp8) of "
                  "bf16 activations, K={}, one scale per "
                  "group of {}: scale = max(amax, 1e-10) / 448, q = clamp(x / scale) as "
                  "float8_e4m3fn{}. {}",
                  k.k, k.group_size, what, provenance(ctx))
            : fmt::format(
                  "Per-token FP8 quantization (sgl-kernel sgl_per_token_quant_fp8) of bf16 "
                  "activations, K={}, one scale per row: "
                  "scale = max(amax, 1e-10) / 448, q = clamp(x / scale) as float8_e4m3fn{}. {}",
                  k.k, what, provenance(ctx));
  Builder b(name_of(k), "quantization", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("quantization:float8_e4m3fn");
  b.var("M", "Number of rows (tokens).").constant("K", k.k, "Row length.");
  if (group) b.constant("num_groups", k.k / k.group_size, fmt::format("K / {}.", k.group_size));
  b.input("input", {"M", "K"}, DType::kBFloat16, "Activations.");
  b.output("output_q", {"M", "K"}, DType::kFloat8E4M3FN, "Quantized activations.");
  if (group) {
    b.output("output_s", {"M", "num_groups"}, DType::kFloat32,
             "Dequantization scale of each group.");
    b.reference(fill(templates::quantization_per_token_group_fp8,
                     {{"K", std::to_string(k.k)}, {"G", std::to_string(k.group_size)}}));
  } else {
    b.output("output_s", {"M"}, DType::kFloat32, "Dequantization scale of each row.");
    b.reference(fill(templates::quantization_per_token_fp8, {{"K", std::to_string(k.k)}}));
  }
  return b.build();
}

std::string name_of(const QuantizationKernel& k) {
  switch (k.kind) {
    case QuantKind::kPerTokenGroupFp8:
      return fmt::format("per_token_group_quant_fp8_k{}_g{}", k.k, k.group_size);
    case QuantKind::kPerTokenFp8:
      return fmt::format("per_token_quant_fp8_k{}", k.k);
    case QuantKind::kPerTensorFp8:
      return fmt::format("per_tensor_quant_fp8_k{}", k.k);
  }
  return {};
}

}  // namespace fib::onboard::gen
