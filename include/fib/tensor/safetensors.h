// safetensors files: read (memory-mapped, header fully validated) and write (atomic), in the
// format PyTorch's safetensors library reads and writes.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/tensor/safetensors_header.h"
#include "fib/tensor/tensor.h"

namespace fib {

// An open safetensors file. Tensors are read from a read-only memory map on demand. The map
// pins the file's contents as they were when opened, even when write_safetensors replaces the
// file meanwhile (a rename leaves the old inode alive); only a writer that truncates the file
// in place could break it, and fib's writers never do.
class SafetensorsFile {
 public:
  // Opens and validates `path`; throws fib::Error with the header findings.
  static SafetensorsFile open(const std::filesystem::path& path);
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;  // owns a memory map that must be unmapped once
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const SafetensorsHeader& header() const { return header_; }
  const std::filesystem::path& path() const { return path_; }
  std::vector<std::string> keys() const;
  bool contains(const std::string& key) const;
  // A copy of the tensor `key`; throws fib::Error when it is absent (with a "did you mean"
  // hint) or its dtype has no FlashInfer-Trace equivalent (F64, C64, F8_E4M3FNUZ, ...).
  Tensor read(const std::string& key) const;

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  SafetensorsHeader header_;
  const std::byte* map_ = nullptr;
  std::size_t map_size_ = 0;
};

// Writes tensors (in the given order, data laid out contiguously) with optional string
// metadata, atomically: a temporary file beside `path`, fsync, rename, fsync of the folder, so
// readers see the old file or the new one, never a part. Missing parent folders are created.
// Names must be unique, non-empty, valid UTF-8 and not "__metadata__"; every tensor must be
// defined. The header is compact JSON (metadata first, then the tensors) padded with spaces to
// a multiple of 8 bytes, as the safetensors library writes it, so the same tensors in the same
// order give the same bytes. Throws fib::Error.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct SafetensorsWriteOptions {
  // Every tensor's data starts at a multiple of this in the file (a power of two, >= 8); above
  // 8, "__pad.N" uint8 entries fill the gaps (the format allows no holes) and the header is
  // padded with spaces. 64 lets a reader map the file and hand out cache-line-aligned tensors.
  std::size_t alignment = 8;
  // fsync the file and its folder before and after the rename. Scratch files that are remade
  // on a rerun (fib run's input sets) skip it: the rename alone keeps readers from partial
  // files.
  bool durable = true;
};
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const SafetensorsWriteOptions& options);

}  // namespace fib
