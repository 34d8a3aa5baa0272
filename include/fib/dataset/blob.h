// Blob files of a dataset (safetensors inputs): path resolution inside the dataset root and
// Git LFS pointer detection.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace fib {

struct LfsPointer {
  std::string oid;  // "sha256:..."
  std::uint64_t size = 0;
};

// Recognizes a Git LFS pointer file ("version https://git-lfs.github.com/spec/v1", oid, size).
std::optional<LfsPointer> parse_lfs_pointer(std::string_view text);

enum class BlobState : std::uint8_t {
  kOk,
  kUnsafePath,
  kOutsideRoot,
  kMissing,
  kNotAFile,
  kLfsPointer
};

struct BlobLocation {
  BlobState state = BlobState::kOk;
  std::filesystem::path path;  // resolved absolute path (when it could be formed)
  std::string message;         // why it is not usable, with a suggestion
  std::optional<LfsPointer> lfs;
};

// Resolves `relative` (e.g. "./blob/workloads/gemm/x.safetensors") against the dataset root:
// rejects absolute paths and "..", paths whose real location (after symlinks) leaves the
// root, missing files, and Git LFS pointers that were never pulled.
BlobLocation locate_blob(const std::filesystem::path& root, std::string_view relative);

}  // namespace fib
