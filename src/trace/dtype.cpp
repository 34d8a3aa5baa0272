#include "fib/trace/dtype.h"

#include <limits>

namespace fib {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat8E4M3FN:
      return "float8_e4m3fn";
    case DType::kFloat8E5M2:
      return "float8_e5m2";
    case DType::kFloat4E2M1:
      return "float4_e2m1";
    case DType::kInt64:
      return "int64";
    case DType::kInt32:
      return "int32";
    case DType::kInt16:
      return "int16";
    case DType::kInt8:
      return "int8";
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

std::array<std::string_view, kAllDTypes.size()> dtype_names() {
  std::array<std::string_view, kAllDTypes.size()> out{};
  for (std::size_t i = 0; i < kAllDTypes.size(); ++i) out[i] = dtype_name(kAllDTypes[i]);
  return out;
}

int dtype_bits(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kInt32:
      return 32;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
      return 16;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return 8;
    case DType::kFloat4E2M1:
      return 4;
    case DType::kInt64:
      return 64;
  }
  return 8;
}

bool dtype_is_float(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
    case DType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

bool dtype_is_integer(DType t) {
  switch (t) {
    case DType::kInt64:
    case DType::kInt32:
    case DType::kInt16:
    case DType::kInt8:
    case DType::kUInt8:
      return true;
    default:
      return false;
  }
}

std::optional<std::uint64_t> dtype_storage_bytes(DType t, std::uint64_t numel) {
  const int bits = dtype_bits(t);
  if (bits == 4) return numel / 2 + numel % 2;
  const std::uint64_t per = static_cast<std::uint64_t>(bits / 8);
  if (numel > std::numeric_limits<std::uint64_t>::max() / per) return std::nullopt;
  return numel * per;
}

}  // namespace fib
