// A temporary folder removed at the end of a test, with helpers to write files into it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace fib::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;  // owns a folder that must be removed exactly once
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `content` to path()/relative, creating folders.
  std::filesystem::path write(const std::string& relative, std::string_view content) const;
  std::string read(const std::string& relative) const;
  static std::string read_file(const std::filesystem::path& path);

 private:
  std::filesystem::path path_;
};

// Copies a folder tree (for tests that modify a copy of the corpus or an example).
void copy_tree(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace fib::testing
