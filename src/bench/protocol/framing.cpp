#include "fib/bench/protocol/framing.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fib/base/files.h"

namespace fib::bench::detail {

namespace {
bool read_all(int fd, char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, data, n);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

std::uint64_t decode_length(const char* p) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(p[i]);
  return n;
}
}  // namespace

void write_message(int fd, const std::string& text) {
  char header[8];
  std::uint64_t n = text.size();
  for (char& c : header) {
    c = static_cast<char>(n & 0xff);
    n >>= 8;
  }
  write_all(fd, header, sizeof header, "worker channel");
  write_all(fd, text.data(), text.size(), "worker channel");
}

ReadResult read_message(int fd, std::string* out) {
  char header[8];
  if (!read_all(fd, header, sizeof header)) return ReadResult::kEof;
  const std::uint64_t n = decode_length(header);
  if (n > kMaxMessageBytes) return ReadResult::kEof;
  out->resize(n);
  if (!read_all(fd, out->data(), n)) return ReadResult::kEof;
  return ReadResult::kMessage;
}

ReadResult MessageReader::pump(int fd) {
  char chunk[65536];
  for (;;) {
    const ssize_t r = ::read(fd, chunk, sizeof chunk);
    if (r > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(r));
      if (complete()) return ReadResult::kMessage;
      continue;
    }
    if (r == 0) return complete() ? ReadResult::kMessage : ReadResult::kEof;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return complete() ? ReadResult::kMessage : ReadResult::kTimeout;
    }
    return ReadResult::kEof;
  }
}

bool MessageReader::complete() const {
  if (buffer_.size() < 8) return false;
  const std::uint64_t n = decode_length(buffer_.data());
  return n > kMaxMessageBytes || buffer_.size() >= 8 + n;
}

std::string MessageReader::take() {
  const std::uint64_t n = decode_length(buffer_.data());
  std::string msg = buffer_.substr(8, n);
  buffer_.erase(0, 8 + n);
  return msg;
}

}  // namespace fib::bench::detail
