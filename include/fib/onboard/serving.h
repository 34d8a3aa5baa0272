// How a model is served for onboarding: tensor/expert parallel sizes, KV page sizes, stages,
// which kernel families to emit and how GEMM shapes are named.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fib::onboard {

enum class Stage : std::uint8_t {
  kPrefill,
  kDecode,
  kMtp,  // multi-token verification (speculative decoding); only linear attention differs
};
std::string_view stage_name(Stage s);
std::optional<Stage> parse_stage(std::string_view s);

enum class GemmShapes : std::uint8_t {
  kDataset,  // full projection shapes, as the dataset names GEMMs
  kPerRank,  // what one GPU multiplies under tensor parallelism
};
std::string_view gemm_shapes_name(GemmShapes g);
std::optional<GemmShapes> parse_gemm_shapes(std::string_view s);

// The weight and activation format of the model's linear layers (not the MoE experts, which
// have their own formats, nor the router and lm_head, which stay bf16 as SGLang serves them).
enum class Quantization : std::uint8_t {
  kNone,          // bf16 GEMMs
  kFp8Block,      // fp8 e4m3, 128x128 weight blocks, 1x128 activation groups (DeepSeek V3/R1)
  kFp8PerTensor,  // fp8 e4m3, one scale per weight and per activation tensor
  kInt8,          // W8A8 int8, per-channel weight and per-token activation scales
};
std::string_view quantization_name(Quantization q);  // "none", "fp8-block", ...
std::optional<Quantization> parse_quantization(std::string_view s);
std::vector<std::string_view> quantization_names();

// One parallel configuration of a serving deployment.
struct ServingPoint {
  int tp = 1;
  int ep = 1;
};

struct ServingOptions {
  std::vector<int> tp = {1};
  std::vector<int> ep = {1};
  std::vector<std::int64_t> page_sizes = {1, 64};
  std::vector<Stage> stages = {Stage::kPrefill, Stage::kDecode, Stage::kMtp};
  bool include_quantized = false;  // also the TRT-LLM FP4 / FP8-per-tensor MoE variants
  bool mtp = false;  // also the config's multi-token-prediction draft layers (speculative decoding)
  std::vector<std::string> op_types;  // empty: all
  GemmShapes gemm_shapes = GemmShapes::kDataset;
  // Unset: what the model's config says (ModelConfig::quantization).
  std::optional<Quantization> quantization;

  bool has_stage(Stage s) const;
  bool wants_op_type(std::string_view op_type) const;
  // Every (tp, ep) pair, tp-major.
  std::vector<ServingPoint> points() const;
};

}  // namespace fib::onboard
