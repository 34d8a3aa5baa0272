// The framing between fib and its worker processes: each message is an 8-byte little-endian
// length followed by that many bytes of JSON. The channel is a private socket pair; the
// solution's stdout/stderr go elsewhere (a capped capture pipe), so printing cannot forge a
// reply.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace fib::bench::detail {

inline constexpr std::uint64_t kMaxMessageBytes = 1ull << 30;

// Writes one message; throws fib::Error when the peer is gone (never raises SIGPIPE).
void write_message(int fd, const std::string& text);

enum class ReadResult : std::uint8_t { kMessage, kEof, kTimeout };

// Reads one message, blocking (the worker side).
ReadResult read_message(int fd, std::string* out);

// Incremental reader for the parent, which polls several descriptors at once.
class MessageReader {
 public:
  // Reads what is available on `fd` (non-blocking); true once a whole message is buffered.
  // Returns kEof when the peer closed before a whole message.
  ReadResult pump(int fd);
  bool complete() const;
  std::string take();
  // Bytes buffered beyond the messages taken.
  bool pending() const { return !buffer_.empty(); }

 private:
  std::string buffer_;
};

}  // namespace fib::bench::detail
