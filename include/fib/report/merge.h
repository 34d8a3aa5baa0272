// `report merge`: several dataset folders merged into a new folder in the canonical layout,
// every conflict reported with both sources.
//
// Records go to their canonical paths (layout.h). Where two sources hold the same definition
// name, solution name or workload uuid with different content, the first source (in the
// order given) is kept and the conflict is reported; the rejected record's dependents in its
// own dataset go with it (see Conflict). Identical duplicates are merged silently, traces are
// concatenated and traces with identical content dropped. Files that are not records (blobs,
// READMEs) are copied to the same relative path, a different file already there being a
// conflict. Record files are copied byte for byte when a whole file survives unchanged, so
// merging one clean canonical dataset reproduces it exactly.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/dataset/trace_set.h"
#include "fib/report/datasets.h"
#include "fib/trace/json_reader.h"

namespace fib::report {

struct MergeOptions {
  // Write into an output folder that is not empty; files at the same paths are replaced, other
  // files there are left as they are.
  bool force = false;
  LoadOptions load;
};

struct MergeCounts {
  std::size_t definitions = 0;
  std::size_t solutions = 0;
  std::size_t workloads = 0;
  std::size_t traces = 0;
  std::size_t other_files = 0;  // blobs and other non-record files copied
  std::size_t files_written = 0;
  std::size_t identical_duplicates = 0;  // records and files already present, skipped
  std::size_t duplicate_traces = 0;
  std::size_t dependents_dropped = 0;
};

struct MergeReport {
  std::vector<std::string> inputs;
  std::string output;
  MergeCounts counts;
  std::vector<Conflict> conflicts;
  // Load findings of the inputs (records that could not be read are not carried over), records
  // kept at a non-canonical path, and paths two records both needed.
  Diagnostics diagnostics;

  // Something was not carried over: a conflict or an error finding (`fib report merge` exits 1).
  bool has_problems() const { return !conflicts.empty() || diagnostics.has_errors(); }
};

// Throws fib::Error, writing nothing, when there is no input, an input cannot be loaded, the
// output is an input or overlaps one, or the output folder is not empty (without force).
MergeReport merge_datasets(std::span<const std::filesystem::path> inputs,
                           const std::filesystem::path& output, const MergeOptions& options = {});
Json to_json(const MergeReport& r);
std::string render_text(const MergeReport& r);

}  // namespace fib::report
