// The apply table's on-disk cache, keyed by the dataset's content: the bytes of every file under
// definitions/, solutions/ and traces/ (and the options), so any change to a trace, a solution
// or a definition builds the table again (docs/apply.md, "Cache").
#pragma once

#include <filesystem>
#include <string>

#include "fib/apply/table.h"

namespace fib::apply {

// $FIB_APPLY_CACHE_DIR, else $XDG_CACHE_HOME/fib/apply, else ~/.cache/fib/apply.
std::filesystem::path default_table_cache_dir();

// "sha256:<hex>" over the format version, the options and each file of the dataset's
// definitions/, solutions/ and traces/ (relative path, size, bytes; in path order; hidden files,
// such as atomic writes' temporaries, left out). Throws fib::Error when a file cannot be read.
std::string dataset_digest(const std::filesystem::path& dataset, const ApplyOptions& options);

struct CachedTable {
  ApplyTable table;
  bool from_cache = false;
  std::filesystem::path file;  // <cache>/<digest hex>.json
};

// The cached table of the dataset's content when there is one (its artifacts looked up again),
// else builds it from the loaded dataset and stores it (atomically). `diag` gets the dataset's
// load findings when it is loaded.
CachedTable load_or_build(const std::filesystem::path& dataset, const ApplyOptions& options,
                          const std::filesystem::path& cache_dir, Diagnostics& diag);

}  // namespace fib::apply
