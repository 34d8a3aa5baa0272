// Writing files: every byte of a buffer to a descriptor, and replacing a file atomically (a
// temporary file beside it, renamed into place). fib's one copy of each.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string_view>

namespace fib {

// Writes all `size` bytes to `fd`, going on after short writes and EINTR. A socket is written
// with send(MSG_NOSIGNAL), so a peer that has gone shows as an error rather than a SIGPIPE.
// Throws fib::Error naming `name` (the file, or what the descriptor is): "write failed: ...".
void write_all(int fd, const void* data, std::size_t size, std::string_view name);
inline void write_all(int fd, std::string_view data, std::string_view name) {
  write_all(fd, data.data(), data.size(), name);
}

struct AtomicWriteOptions {
  // fsync the file before the rename and its folder after, so the new content survives a crash.
  // Files any rerun remakes (caches, scratch) skip both.
  bool durable = true;
  unsigned mode = 0644;  // the new file's permission bits (before the umask)
};

// Writes into a temporary file's descriptor (`tmp` is its path, for messages), with write_all.
using FileWriter = std::function<void(int fd, const std::filesystem::path& tmp)>;

// Replaces `path` atomically: readers see the old file or the whole new one, never a mix, even if
// the process dies mid-write. Creates parent folders. The temporary file is named
// ".<name>.tmp.<pid>.<n>.<time>" beside `path` (same file system, so the rename is atomic; unique,
// so concurrent writers never share one; dataset loads skip such names). On any failure the
// temporary file is removed and fib::Error thrown (whatever `writer` throws passes through).
void write_file_atomic(const std::filesystem::path& path, const FileWriter& writer,
                       AtomicWriteOptions options = {});
void write_file_atomic(const std::filesystem::path& path, std::string_view content,
                       AtomicWriteOptions options = {});

}  // namespace fib
