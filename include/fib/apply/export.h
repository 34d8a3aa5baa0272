// `fib apply export DIR`: the chosen solution per definition in the layout FlashInfer's own Trace
// Apply reads from FLASHINFER_TRACE_PATH (definitions/**/*.json and solutions/**/*.json, one
// solution per definition), so an engine on FlashInfer runs fib's winners without fib.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fib/apply/table.h"
#include "fib/dataset/trace_set.h"

namespace fib::apply {

// The file at DIR's root that marks a folder as an export (and says what it holds): an existing
// DIR is replaced only when it holds one, or is empty.
inline constexpr std::string_view kExportManifest = "fib-apply-export.json";

struct ExportResult {
  std::vector<std::string> files;  // written, relative to DIR, sorted
  std::size_t definitions = 0;
};

// Writes each definition's fallback choice (its best over all axes) with its definition:
// DIR/definitions/<op_type>/<definition>.json, DIR/solutions/<author>/<op_type>/<definition>/
// <solution>.json and the manifest; a definition whose solutions were all excluded is left out. The
// whole folder is made beside DIR and swapped in at once, so a reader sees the old export or the
// new one. Each solution's record is checked against its digest again. Throws fib::Error when the
// table has no fallback for a definition (made with fallback off), DIR holds something else, or a
// write fails.
ExportResult export_trace_apply(const ApplyTable& table, const TraceSet& set,
                                const std::filesystem::path& dir);

}  // namespace fib::apply
