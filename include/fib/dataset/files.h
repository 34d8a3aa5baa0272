// Crash-safe file writes: atomic replacement (temp file + fsync + rename) and JSONL appends
// that never mix a new record into a torn last line.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fib {

// Replaces `path` with `content` atomically: readers see the old file or the new one, never a
// mix, even if the process dies mid-write. Creates parent folders. Throws fib::Error.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

// Appends one line per record (records must not contain '\n') with a single write under an
// exclusive lock, so concurrent writers do not interleave. If the file ends in a torn line
// (no final newline), a newline is written first so the new records stay intact and the
// torn line remains visible to the reader. With `durable`, fsyncs before returning.
void append_jsonl(const std::filesystem::path& path, std::span<const std::string> records,
                  bool durable = true);

struct JsonlLine {
  std::size_t number = 0;  // 1-based line number
  std::string_view text;   // without the newline
  bool terminated = true;  // false for a last line with no final newline
};
// Splits JSONL text into its non-blank lines.
std::vector<JsonlLine> split_jsonl(std::string_view text);

}  // namespace fib
