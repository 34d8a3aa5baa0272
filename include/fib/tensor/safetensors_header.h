// safetensors headers: read and validate the JSON header of a .safetensors file with every
// length and offset bounds-checked, without reading the tensor data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/trace/dtype.h"

namespace fib {

// Headers larger than this are refused (the format's own readers use the same bound).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = std::uint64_t{100} << 20;

struct SafetensorsEntry {
  std::string name;
  std::string dtype_code;      // "BF16", "F32", "I32", "F8_E4M3", ...
  std::optional<DType> dtype;  // nullopt for codes with no FlashInfer-Trace dtype (F64, U32...)
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // byte offsets into the data section
  std::uint64_t end = 0;
};

struct SafetensorsHeader {
  std::uint64_t header_bytes = 0;         // length of the JSON header
  std::uint64_t data_bytes = 0;           // length of the data section after it
  std::vector<SafetensorsEntry> tensors;  // in header order
  std::vector<std::pair<std::string, std::string>> metadata;

  const SafetensorsEntry* find(std::string_view name) const;
  std::uint64_t data_offset() const { return 8 + header_bytes; }  // file offset of data
};

// The fib dtype for a safetensors dtype code, and back.
std::optional<DType> dtype_from_safetensors(std::string_view code);
std::string_view safetensors_code(DType t);

// Validates a header given the first bytes of a file (at least 8 + header length, or the whole
// file) and the file's total size. Checks: the 8-byte length fits the file and the limit; the
// header is a JSON object of {dtype, shape, data_offsets} entries; dtype codes are known;
// shapes are non-negative; offsets lie inside the data section, match shape x dtype size, and
// cover it without overlaps or holes.
std::optional<SafetensorsHeader> parse_safetensors_header(std::string_view prefix,
                                                          std::uint64_t file_size,
                                                          const std::string& file,
                                                          Diagnostics& diag);

// Reads only the header of a file on disk.
std::optional<SafetensorsHeader> read_safetensors_header(const std::string& path,
                                                         Diagnostics& diag);

}  // namespace fib
