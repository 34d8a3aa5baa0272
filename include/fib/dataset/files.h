// Crash-safe dataset files: JSONL appends that never mix a new record into a torn last line, on
// top of base's atomic replacement (write_file_atomic), which dataset writers use with them.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fib/base/files.h"

namespace fib {

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
