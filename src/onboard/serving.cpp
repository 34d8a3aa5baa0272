#include "fib/onboard/serving.h"

#include <algorithm>

namespace fib::onboard {

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::kPrefill:
      return "prefill";
    case Stage::kDecode:
      return "decode";
    case Stage::kMtp:
      return "mtp";
  }
  return "?";
}

std::optional<Stage> parse_stage(std::string_view s) {
  if (s == "prefill") return Stage::kPrefill;
  if (s == "decode") return Stage::kDecode;
  if (s == "mtp") return Stage::kMtp;
  return std::nullopt;
}

std::string_view gemm_shapes_name(GemmShapes g) {
  return g == GemmShapes::kDataset ? "dataset" : "per-rank";
}

std::optional<GemmShapes> parse_gemm_shapes(std::string_view s) {
  if (s == "dataset") return GemmShapes::kDataset;
  if (s == "per-rank" || s == "per_rank") return GemmShapes::kPerRank;
  return std::nullopt;
}

std::string_view quantization_name(Quantization q) {
  switch (q) {
    case Quantization::kNone:
      return "none";
    case Quantization::kFp8Block:
      return "fp8-block";
    case Quantization::kFp8PerTensor:
      return "fp8-per-tensor";
    case Quantization::kInt8:
      return "w8a8-int8";
  }
  return "?";
}

std::optional<Quantization> parse_quantization(std::string_view s) {
  for (Quantization q : {Quantization::kNone, Quantization::kFp8Block, Quantization::kFp8PerTensor,
                         Quantization::kInt8}) {
    if (s == quantization_name(q)) return q;
  }
  return std::nullopt;
}

std::vector<std::string_view> quantization_names() {
  return {"none", "fp8-block", "fp8-per-tensor", "w8a8-int8"};
}

bool ServingOptions::has_stage(Stage s) const {
  return std::find(stages.begin(), stages.end(), s) != stages.end();
}

bool ServingOptions::wants_op_type(std::string_view op_type) const {
  return op_types.empty() || std::find(op_types.begin(), op_types.end(), op_type) != op_types.end();
}

std::vector<ServingPoint> ServingOptions::points() const {
  std::vector<ServingPoint> out;
  for (int t : tp) {
    for (int e : ep) out.push_back({t, e});
  }
  return out;
}

}  // namespace fib::onboard
