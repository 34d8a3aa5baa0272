// DType: the element types of the FlashInfer-Trace schema, with names and storage sizes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fib {

enum class DType : std::uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat8E4M3FN,
  kFloat8E5M2,
  kFloat4E2M1,  // stored as packed pairs: two elements per byte, low nibble first
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool,
};

inline constexpr std::array<DType, 12> kAllDTypes = {
    DType::kFloat32,    DType::kFloat16,    DType::kBFloat16, DType::kFloat8E4M3FN,
    DType::kFloat8E5M2, DType::kFloat4E2M1, DType::kInt64,    DType::kInt32,
    DType::kInt16,      DType::kInt8,       DType::kUInt8,    DType::kBool};

// Schema spelling: "float32", "bfloat16", "float8_e4m3fn", ...
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
// Every schema spelling, for "did you mean" suggestions.
std::array<std::string_view, kAllDTypes.size()> dtype_names();

// Bits per element (4 for float4_e2m1).
int dtype_bits(DType t);
bool dtype_is_float(DType t);
bool dtype_is_integer(DType t);  // bool is not an integer type here

// Bytes needed to store `numel` elements, or nullopt on overflow. float4_e2m1 packs two
// elements per byte, so an odd count rounds up.
std::optional<std::uint64_t> dtype_storage_bytes(DType t, std::uint64_t numel);

}  // namespace fib
