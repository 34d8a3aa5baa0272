// Fuzz target: arbitrary bytes as a whole .safetensors file -> parse_safetensors_header.
//
// The header is parsed twice: from the whole file (what a caller holding the file in memory
// does) and from only the 8-byte length plus the header, with the true file size (what
// read_safetensors_header does). Both must agree. An accepted header must describe the file
// exactly: sizes add up, every tensor lies inside the data section with the bytes its shape and
// dtype need, and the tensors tile the data section.
// The same bytes are also read as a Git LFS pointer (what a blob path may hold instead of the
// data, see fib/dataset/blob.h); no file is both.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fib/dataset/blob.h"
#include "fib/tensor/safetensors_header.h"
#include "fuzz_common.h"

namespace {

using fib::fuzz::check;
using fib::fuzz::die;

void check_header(const fib::SafetensorsHeader& h, std::uint64_t file_size) {
  check(8 + h.header_bytes + h.data_bytes == file_size, "header and data sizes do not add up");
  check(h.data_offset() == 8 + h.header_bytes, "data_offset");
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& t : h.tensors) {
    check(t.begin <= t.end && t.end <= h.data_bytes, "tensor outside the data section", t.name);
    check(h.find(t.name) != nullptr, "find() misses a tensor", t.name);
    if (t.dtype) {
      check(fib::safetensors_code(*t.dtype) == t.dtype_code, "dtype code round trip", t.dtype_code);
    }
    check(fib::dtype_from_safetensors(t.dtype_code) == t.dtype, "dtype lookup", t.dtype_code);
    for (auto d : t.shape) check(d >= 0, "negative dimension accepted", t.name);
    ranges.emplace_back(t.begin, t.end);
  }
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t pos = 0;
  for (const auto& [b, e] : ranges) {
    if (b == e && b == pos) continue;  // empty tensors take no room
    check(b == pos, "accepted tensors do not tile the data section");
    pos = e;
  }
  check(pos == h.data_bytes, "accepted tensors leave bytes uncovered");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  fib::Diagnostics diag;
  std::optional<fib::SafetensorsHeader> whole;
  try {
    whole = fib::parse_safetensors_header(file, size, "fuzz.safetensors", diag);
  } catch (const std::exception& e) {
    die("parse_safetensors_header threw", e.what());
  }
  if (!whole) {
    check(diag.has_errors(), "header refused without an error");
  } else {
    check_header(*whole, size);
  }
  (void)diag.to_string();

  // Only the length and the header, as read_safetensors_header passes them.
  if (size >= 8) {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
    if (n <= size - 8) {
      fib::Diagnostics prefix_diag;
      auto prefix = fib::parse_safetensors_header(file.substr(0, 8 + static_cast<std::size_t>(n)),
                                                  size, "fuzz.safetensors", prefix_diag);
      check(prefix.has_value() == whole.has_value(), "prefix and whole-file parses disagree",
            diag.to_string() + "\n--\n" + prefix_diag.to_string());
      if (prefix) check(prefix->tensors.size() == whole->tensors.size(), "tensor counts disagree");
    }
  }
  // A file that claims to be larger than the bytes at hand must not be read past them.
  fib::Diagnostics big_diag;
  (void)fib::parse_safetensors_header(file, std::uint64_t{size} + 4096, "fuzz.safetensors",
                                      big_diag);

  if (auto lfs = fib::parse_lfs_pointer(file)) {
    check(size <= 1024, "an LFS pointer over 1 KiB accepted");
    check(!lfs->oid.empty(), "an LFS pointer without an oid accepted");
    check(!whole, "a file is both a safetensors file and an LFS pointer");
  }
  return 0;
}
