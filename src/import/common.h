// What the definition and workload importers share: listing a dump folder and turning findings
// into a report line.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/import/import.h"

namespace fib::import {

// The entries of `dir` in name order: regular files ending in `extension`, or with an empty
// extension the folders. Throws fib::Error when `dir` is not a readable folder.
std::vector<std::filesystem::path> sorted_entries(const std::filesystem::path& dir,
                                                  std::string_view extension);

// `report` as an error whose notes are the error findings ("JSON path: message (hint)").
FileReport error_report(FileReport report, const Diagnostics& diag);

}  // namespace fib::import
