// Solution-call arguments in the ABI's terms (fib/bench/runtime/call_arguments.h).
#include "fib/bench/runtime/call_arguments.h"

#include <fmt/format.h>

#include "fib/base/diagnostics.h"

namespace fib::bench::detail {

// The ABI numbers dtypes as fib::DType does; the worker converts between them by value.
static_assert(static_cast<int>(DType::kFloat32) == FIB_DTYPE_FLOAT32 &&
              static_cast<int>(DType::kFloat16) == FIB_DTYPE_FLOAT16 &&
              static_cast<int>(DType::kBFloat16) == FIB_DTYPE_BFLOAT16 &&
              static_cast<int>(DType::kFloat8E4M3FN) == FIB_DTYPE_FLOAT8_E4M3FN &&
              static_cast<int>(DType::kFloat8E5M2) == FIB_DTYPE_FLOAT8_E5M2 &&
              static_cast<int>(DType::kFloat4E2M1) == FIB_DTYPE_FLOAT4_E2M1 &&
              static_cast<int>(DType::kInt64) == FIB_DTYPE_INT64 &&
              static_cast<int>(DType::kInt32) == FIB_DTYPE_INT32 &&
              static_cast<int>(DType::kInt16) == FIB_DTYPE_INT16 &&
              static_cast<int>(DType::kInt8) == FIB_DTYPE_INT8 &&
              static_cast<int>(DType::kUInt8) == FIB_DTYPE_UINT8 &&
              static_cast<int>(DType::kBool) == FIB_DTYPE_BOOL);

fib_tensor contiguous_view(void* data, DType dtype, const Shape& shape, std::int32_t device_type,
                           std::int32_t device_id) {
  if (shape.size() > FIB_MAX_RANK) {
    throw Error("request", fmt::format("a tensor of rank {} exceeds the solution ABI's {}",
                                       shape.size(), FIB_MAX_RANK));
  }
  fib_tensor t{};
  t.data = data;
  t.ndim = static_cast<std::int32_t>(shape.size());
  std::int64_t stride = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    t.shape[i] = shape[static_cast<std::size_t>(i)];
    t.strides[i] = stride;
    stride *= shape[static_cast<std::size_t>(i)];
  }
  t.dtype = static_cast<std::int32_t>(dtype);
  t.device_type = device_type;
  t.device_id = device_id;
  return t;
}

fib_value scalar_value(const TensorSpec& spec, const Scalars& scalars) {
  fib_value v{};
  auto it = scalars.find(spec.name);
  if (it == scalars.end()) {
    v.kind = FIB_VALUE_ABSENT;
  } else if (const auto* b = std::get_if<bool>(&it->second)) {
    v.kind = FIB_VALUE_BOOL;
    v.i = *b ? 1 : 0;
  } else if (const auto* i = std::get_if<std::int64_t>(&it->second)) {
    v.kind = dtype_is_float(spec.dtype) ? FIB_VALUE_FLOAT : FIB_VALUE_INT;
    v.i = *i;
    v.f = static_cast<double>(*i);
  } else {
    v.kind = FIB_VALUE_FLOAT;
    v.f = std::get<double>(it->second);
  }
  return v;
}

std::vector<fib_value> build_arguments(const Definition& def, const InputViews& in,
                                       const std::vector<fib_tensor>& outputs) {
  static const Scalars kNoScalars;
  std::vector<fib_value> args;
  args.reserve(def.inputs.size() + outputs.size());
  for (const auto& spec : def.inputs) {
    fib_value v{};
    if (spec.is_scalar()) {
      v = scalar_value(spec, in.scalars ? *in.scalars : kNoScalars);
    } else if (auto it = in.tensors.find(spec.name); it != in.tensors.end()) {
      v.kind = FIB_VALUE_TENSOR;
      v.tensor = it->second;
    } else {
      v.kind = FIB_VALUE_ABSENT;
    }
    args.push_back(v);
  }
  for (const fib_tensor& out : outputs) {
    fib_value v{};
    v.kind = FIB_VALUE_TENSOR;
    v.tensor = out;
    args.push_back(v);
  }
  return args;
}

}  // namespace fib::bench::detail
