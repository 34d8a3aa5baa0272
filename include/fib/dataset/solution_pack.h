// Packing source files into a solution record (sources embedded, spec filled) and storing it in a
// dataset at its canonical path, or in a file: what `fib solution pack` does.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/dataset/trace_set.h"
#include "fib/trace/definition.h"
#include "fib/trace/solution.h"

namespace fib {

// What to pack. Errors name the field by its `fib solution pack` flag ("--name", "--entry").
struct SolutionPackRequest {
  std::string definition, name, author;
  std::string entry;  // FILE::SYMBOL; FILE is one of the sources (as stored, or its path)
  std::string language = "cpp";
  std::string binding;                       // empty: tvm-ffi for cpp and cuda, none otherwise
  std::vector<std::string> target_hardware;  // empty: cpu for cpp, cuda for the GPU languages
  std::optional<std::string> description;
  std::vector<std::string> sources;  // paths as the user gave them
  bool value_returning = false;      // destination_passing_style false
};

// Checks the request and reads the sources, stored relative to the deepest folder holding all of
// them. Throws fib::Error naming the flag or source file at fault; reads no dataset.
Solution pack_solution(const SolutionPackRequest& request);

struct StoredSolution {
  std::string path;       // where it was written
  bool replaced = false;  // a solution file was there before
};

// Writes `s`, a solution of `def` in `set`, to `output`, or when that is empty into the dataset at
// its canonical path. What is written must read back as the same solution: when it does not,
// nothing is written, the loader's findings go to `findings` and the result is empty. Throws
// fib::Error when the record is over the solution file limit or the dataset has another solution
// of that name elsewhere.
std::optional<StoredSolution> store_packed_solution(const TraceSet& set, const Definition& def,
                                                    const Solution& s, const std::string& output,
                                                    Diagnostics& findings);

// Offset of the first byte that is not part of well-formed UTF-8, or npos. Sources are stored as
// JSON strings, which must be UTF-8.
std::size_t invalid_utf8_offset(std::string_view s);

}  // namespace fib
