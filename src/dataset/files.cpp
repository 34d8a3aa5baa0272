#include "fib/dataset/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

#include "fib/base/diagnostics.h"

namespace fib {

namespace fs = std::filesystem;

namespace {

void make_parents(const fs::path& path) {
  const fs::path parent = path.parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw Error(parent.string(), fmt::format("cannot create folder: {}", ec.message()));
}

}  // namespace

void append_jsonl(const fs::path& path, std::span<const std::string> records, bool durable) {
  if (records.empty()) return;
  std::string buf;
  for (const auto& r : records) {
    if (r.find('\n') != std::string::npos) {
      throw Error(path.string(), "a JSONL record must not contain a newline");
    }
    buf += r;
    buf += '\n';
  }
  make_parents(path);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(path.string(), fmt::format("cannot open for append: {}", std::strerror(errno)));
  if (::flock(fd, LOCK_EX) != 0) {
    ::close(fd);
    throw Error(path.string(), fmt::format("cannot lock: {}", std::strerror(errno)));
  }
  try {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      char last = '\n';
      if (::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') buf.insert(buf.begin(), '\n');
    }
    write_all(fd, buf, path.string());
    if (durable && ::fdatasync(fd) != 0) {
      throw Error(path.string(), fmt::format("fsync failed: {}", std::strerror(errno)));
    }
  } catch (...) {
    ::flock(fd, LOCK_UN);
    ::close(fd);
    throw;
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

std::vector<JsonlLine> split_jsonl(std::string_view text) {
  std::vector<JsonlLine> out;
  std::size_t pos = 0, number = 1;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const bool terminated = nl != std::string_view::npos;
    const std::size_t end = terminated ? nl : text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // Stops at the first non-blank character instead of scanning the whole line.
    const bool blank = line.find_first_not_of(" \t") == std::string_view::npos;
    if (!blank) out.push_back({number, line, terminated});
    ++number;
    pos = terminated ? nl + 1 : text.size();
  }
  return out;
}

}  // namespace fib
