// Builds safetensors files byte by byte for tests: an 8-byte little-endian header length, the
// JSON header as given (no re-serialization, so malformed headers can be written too), and the
// data section.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fib::testing {

inline std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}

// A whole file: length prefix, header text, then `data_bytes` bytes of data (0, 1, 2, ...).
inline std::string safetensors_bytes(std::string_view header, std::uint64_t data_bytes) {
  std::string out = le64(header.size());
  out += header;
  for (std::uint64_t i = 0; i < data_bytes; ++i) out += static_cast<char>(i & 0xFF);
  return out;
}

}  // namespace fib::testing
