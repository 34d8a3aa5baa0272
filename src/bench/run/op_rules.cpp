#include "bench/run/op_rules.h"

#include <cstdint>

namespace fib::bench::detail {

#ifdef FIB_HAVE_CUDA
cuda::RooflineInput roofline_input(const Definition& def, const Workload& w, double median_ms) {
  cuda::RooflineInput in;
  in.median_ms = median_ms;
  const bool whole_inputs = def.op_type == "gemm" || def.op_type == "rmsnorm";
  AxisValues var;
  for (const auto& [k, v] : w.axes) var.emplace_back(k, v);
  const auto bound = def.bind_axes(var);
  if (!bound) return in;
  if (whole_inputs) {
    double bytes = 0;
    for (const auto& spec : def.inputs) {
      if (spec.is_scalar()) continue;
      const auto shape = def.concrete_shape(spec, *bound);
      if (!shape) return in;
      std::uint64_t n = 1;
      for (auto d : *shape) n *= static_cast<std::uint64_t>(d);
      bytes += static_cast<double>(dtype_storage_bytes(spec.dtype, n).value_or(0));
    }
    in.bytes = bytes;
  }
  if (def.op_type == "gemm") {
    const auto m = axis_value(*bound, "M"), n = axis_value(*bound, "N"),
               k = axis_value(*bound, "K");
    if (m && n && k) {
      in.flops = 2.0 * static_cast<double>(*m) * static_cast<double>(*n) * static_cast<double>(*k);
      const DType a = def.inputs.empty() ? DType::kFloat16 : def.inputs.front().dtype;
      in.math = a == DType::kBFloat16  ? cuda::MathKind::kBf16Tensor
                : a == DType::kFloat32 ? cuda::MathKind::kFp32
                : a == DType::kFloat8E4M3FN || a == DType::kFloat8E5M2
                    ? cuda::MathKind::kFp8Tensor
                    : cuda::MathKind::kFp16Tensor;
    }
  }
  return in;
}
#endif

bool checks_sampling_distribution(const Definition& def) { return def.op_type == "sampling"; }

int sampling_draws(const Json& eval_extra) {
  return eval_extra.value("sampling_validation_trials", 100);
}

}  // namespace fib::bench::detail
