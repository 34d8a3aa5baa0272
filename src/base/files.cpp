#include "fib/base/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "fib/base/diagnostics.h"

namespace fib {

namespace fs = std::filesystem;

void write_all(int fd, const void* data, std::size_t size, std::string_view name) {
  const auto* p = static_cast<const char*>(data);
  bool socket = true;  // until send says otherwise
  while (size > 0) {
    ssize_t w = -1;
    if (socket) {
      w = ::send(fd, p, size, MSG_NOSIGNAL);
      if (w < 0 && errno == ENOTSOCK) socket = false;
    }
    if (!socket) w = ::write(fd, p, size);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string(name), fmt::format("write failed: {}", std::strerror(errno)));
    }
    p += w;
    size -= static_cast<std::size_t>(w);
  }
}

namespace {

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

void write_file_atomic(const fs::path& path, const FileWriter& writer, AtomicWriteOptions options) {
  const fs::path parent = path.parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw Error(parent.string(), fmt::format("cannot create folder: {}", ec.message()));
  }
  static std::atomic<unsigned> counter{0};
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  const fs::path tmp = parent / fmt::format(".{}.tmp.{}.{}.{}", path.filename().string(),
                                            ::getpid(), counter.fetch_add(1), stamp);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, options.mode);
  if (fd < 0) throw Error(tmp.string(), fmt::format("cannot create: {}", std::strerror(errno)));
  try {
    writer(fd, tmp);
    if (options.durable && ::fsync(fd) != 0) {
      throw Error(tmp.string(), fmt::format("fsync failed: {}", std::strerror(errno)));
    }
    const int closed = ::close(fd);
    fd = -1;
    if (closed != 0) {
      throw Error(tmp.string(), fmt::format("close failed: {}", std::strerror(errno)));
    }
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error(path.string(), fmt::format("cannot replace: {}", std::strerror(e)));
  }
  if (options.durable) fsync_dir(parent);
}

void write_file_atomic(const fs::path& path, std::string_view content, AtomicWriteOptions options) {
  write_file_atomic(
      path, [content](int fd, const fs::path& tmp) { write_all(fd, content, tmp.string()); },
      options);
}

}  // namespace fib
