// The outputs' poison (fib/bench/protocol/poison.h).
#include "fib/bench/protocol/poison.h"

namespace fib::bench::detail {

Poison poison_for(DType dtype, std::uint64_t k) {
  switch (dtype) {
    case DType::kFloat32:
      return {0x7fc00000u | static_cast<std::uint32_t>((k % 0x3fffffu) + 1), 4, 0};
    case DType::kFloat16:
      return {0x7e00u | static_cast<std::uint32_t>((k % 0x1ffu) + 1), 2, 0};
    case DType::kBFloat16:
      return {0x7fc0u | static_cast<std::uint32_t>((k % 0x3fu) + 1), 2, 0};
    case DType::kFloat8E4M3FN:
      return {(k & 1) ? 0xffu : 0x7fu, 1, 0};
    case DType::kFloat8E5M2:
      return {static_cast<std::uint32_t>(0x7d + (k % 3)), 1, 0};
    case DType::kFloat4E2M1:  // no NaN in e2m1: the largest magnitudes, alternating sign
      return {(k & 1) ? 0xffu : 0x77u, 1, (k & 1) ? -6 : 6};
    case DType::kBool:
      return {(k & 1) ? 1u : 0u, 1, (k & 1) ? 1 : 0};
    default: {
      // Integers: one byte repeated; the sentinel is that pattern read as the element type.
      const std::uint8_t byte = (k & 1) ? 0xa5 : 0x5a;
      const int width = dtype_bits(dtype) / 8;
      std::uint64_t u = 0;
      for (int i = 0; i < width; ++i) u = (u << 8) | byte;
      std::int64_t sentinel = static_cast<std::int64_t>(u);
      if (width < 8) {
        const std::uint64_t sign = 1ull << (width * 8 - 1);
        sentinel = static_cast<std::int64_t>((u ^ sign) - sign);  // sign-extend
      }
      return {byte, 1, sentinel};
    }
  }
}

std::map<std::string, std::int64_t> poison_sentinels(const Definition& def, std::uint64_t k) {
  std::map<std::string, std::int64_t> out;
  for (const auto& spec : def.outputs) {
    if (dtype_is_integer(spec.dtype) || spec.dtype == DType::kBool ||
        spec.dtype == DType::kFloat4E2M1) {
      out[spec.name] = poison_for(spec.dtype, k).sentinel;
    }
  }
  return out;
}

}  // namespace fib::bench::detail
