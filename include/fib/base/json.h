// JSON in fib: the document type, reading and writing JSON text (file limits, parse errors with
// line and column) and the output formats fib writes (pretty files, one-line JSONL records).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "fib/base/diagnostics.h"

namespace fib {

// Ordered JSON: object keys keep their file order, which the schema makes significant
// (inputs are called in order) and which round-tripping must reproduce.
using Json = nlohmann::ordered_json;

// Definition and solution files larger than this are refused rather than read into memory.
inline constexpr std::uint64_t kMaxJsonFileBytes = std::uint64_t{256} << 20;
// Deeper nesting than this is refused (no schema object nests more than a few levels).
inline constexpr int kMaxJsonDepth = 256;

// Reads a whole file. Errors name the file: missing, a directory, unreadable, a symlink loop,
// larger than max_bytes.
std::optional<std::string> read_text_file(const std::string& path, Diagnostics& diag,
                                          std::uint64_t max_bytes = kMaxJsonFileBytes);

// Parses JSON text; on failure reports "line L, column C: ..." against `file`.
std::optional<Json> parse_json(std::string_view text, const std::string& file, Diagnostics& diag);

std::optional<Json> read_json_file(const std::string& path, Diagnostics& diag);

// Two-space indented JSON with a final newline (how definitions and solutions are stored).
std::string dump_json_pretty(const Json& j);
// One line, no final newline (one JSONL record).
std::string dump_json_line(const Json& j);

}  // namespace fib
