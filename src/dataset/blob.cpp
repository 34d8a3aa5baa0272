#include "fib/dataset/blob.h"

#include <fmt/format.h>
#include <algorithm>
#include <fstream>

namespace fib {

namespace fs = std::filesystem;

std::optional<LfsPointer> parse_lfs_pointer(std::string_view text) {
  static constexpr std::string_view kVersion = "version https://git-lfs.github.com/spec/v1";
  if (text.size() > 1024 || text.rfind(kVersion, 0) != 0) return std::nullopt;
  LfsPointer p;
  std::size_t pos = 0;
  bool has_size = false;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (line.rfind("oid ", 0) == 0) p.oid = std::string(line.substr(4));
    if (line.rfind("size ", 0) == 0) {
      std::uint64_t v = 0;
      bool digits = line.size() > 5;
      for (char c : line.substr(5)) {
        if (c < '0' || c > '9') {
          digits = false;
          break;
        }
        // A size that overflows 64 bits is not a pointer git-lfs wrote.
        if (__builtin_mul_overflow(v, std::uint64_t{10}, &v) ||
            __builtin_add_overflow(v, static_cast<std::uint64_t>(c - '0'), &v)) {
          digits = false;
          break;
        }
      }
      if (digits) {
        p.size = v;
        has_size = true;
      }
    }
    pos = nl + 1;
  }
  if (p.oid.empty() || !has_size) return std::nullopt;
  return p;
}

BlobLocation locate_blob(const fs::path& root, std::string_view relative) {
  BlobLocation loc;
  std::string_view rel = relative;
  while (rel.rfind("./", 0) == 0) rel.remove_prefix(2);
  if (rel.empty() || rel.front() == '/') {
    loc.state = BlobState::kUnsafePath;
    loc.message = fmt::format("blob path '{}' must be relative to the dataset root", relative);
    return loc;
  }
  for (const auto& part : fs::path(rel)) {
    if (part == "..") {
      loc.state = BlobState::kUnsafePath;
      loc.message = fmt::format("blob path '{}' climbs out of the dataset with '..'", relative);
      return loc;
    }
  }
  std::error_code ec;
  const fs::path root_abs = fs::weakly_canonical(root, ec);
  loc.path = root_abs / fs::path(rel);
  const fs::path real = fs::weakly_canonical(loc.path, ec);
  if (ec) {
    loc.state = BlobState::kMissing;
    loc.message = fmt::format("blob '{}' cannot be resolved: {}", relative, ec.message());
    return loc;
  }
  const auto mismatch = std::mismatch(root_abs.begin(), root_abs.end(), real.begin(), real.end());
  if (mismatch.first != root_abs.end()) {
    loc.state = BlobState::kOutsideRoot;
    loc.message =
        fmt::format("blob '{}' resolves to {}, outside the dataset root", relative, real.string());
    return loc;
  }
  const auto st = fs::status(real, ec);
  if (ec || !fs::exists(st)) {
    loc.state = BlobState::kMissing;
    loc.message = fmt::format("blob file '{}' does not exist", relative);
    return loc;
  }
  if (!fs::is_regular_file(st)) {
    loc.state = BlobState::kNotAFile;
    loc.message = fmt::format("blob '{}' is not a regular file", relative);
    return loc;
  }
  if (fs::file_size(real, ec) <= 1024) {
    // Read with a bounded read() (istreambuf_iterator trips GCC's -Wnull-dereference).
    std::ifstream in(real, std::ios::binary);
    std::string head(1025, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    if (auto p = parse_lfs_pointer(head)) {
      loc.state = BlobState::kLfsPointer;
      loc.lfs = p;
      loc.message = fmt::format(
          "blob '{}' is a Git LFS pointer ({}, {} bytes), not the data; run `git lfs pull "
          "--include \"{}\"` in the dataset root",
          relative, p->oid, p->size, std::string(rel));
      return loc;
    }
  }
  loc.path = real;
  return loc;
}

}  // namespace fib
