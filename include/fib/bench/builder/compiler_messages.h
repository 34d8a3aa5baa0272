// The compiler's diagnostics of a failed build as a structured list (file, line, column,
// severity, message), read from the build log that fib's own compiler processes wrote: gcc and
// clang ("file:line:col: error: ..."), nvcc's front end ("file(line): error: ..."), the linker's
// undefined references and ptxas/nvcc fatal lines. Files are named as the solution names its
// sources, never by the build folder or sandbox path they were compiled under.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fib/trace/json_reader.h"

namespace fib::bench {

struct CompilerMessage {
  std::string file;      // "kernel.cu" (a source's path), "fib/solution.h", a toolchain header
                         // as the compiler named it, or empty (no file: a linker or ptxas line)
  std::string origin;    // "solution", "fib" (fib's ABI header), "toolchain", or "" (no file)
  int line = 0;          // 1-based; 0 when the message has none
  int column = 0;        // 1-based; 0 when the message has none
  std::string severity;  // "error", "fatal error", "warning", "note", "remark"
  std::string message;   // the rest of the line (at most kMaxCompilerMessageBytes)
};

struct CompilerMessages {
  std::vector<CompilerMessage> messages;  // in the log's order, at most kMaxCompilerMessages
  int errors = 0;                         // every error and fatal error, kept or not
  int warnings = 0;
  std::size_t omitted = 0;  // messages beyond kMaxCompilerMessages
};

// Enough for the first errors and the notes that explain them; a build that fails with
// thousands of errors says nothing more useful in the rest.
inline constexpr std::size_t kMaxCompilerMessages = 20;
inline constexpr std::size_t kMaxCompilerMessageBytes = 400;

// The diagnostics in `log`. `sources` are the solution's source paths (Solution::sources[i].path):
// a file the compiler named by one of them, by a path ending in "/" + one of them, or as "./" +
// one of them is that source; one ending in "include/fib/solution.h" is fib's ABI header.
CompilerMessages parse_compiler_messages(std::string_view log,
                                         std::span<const std::string> sources);

// {"errors", "warnings", "omitted", "messages": [{file, origin, line, column, severity,
// message}]} (line and column left out where 0, file and origin where empty).
Json to_json(const CompilerMessages& m);
// One "file:line:col: severity: message" line per message, each indented by two spaces.
std::string render_compiler_messages(const CompilerMessages& m);

}  // namespace fib::bench
