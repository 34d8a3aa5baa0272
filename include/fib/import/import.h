// fib import: dataset records from what FlashInfer writes. Definition dumps
// (FLASHINFER_TRACE_DUMP=1: one JSON per (op, shape)) become definitions; level-10 API logging
// dumps (FLASHINFER_LOGLEVEL=10: each call's tensors as .safetensors or .pt) become workloads
// with safetensors blobs. Every dump file gets one line of the report: what was written, what was
// repaired, or why it was refused; one bad file never stops the others.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/base/json.h"

namespace fib::import {

enum class Outcome : std::uint8_t {
  kAdded,      // written to the dataset
  kUnchanged,  // the dataset already holds the same record
  kKept,       // the dataset holds a different record of the same name; it was kept
  kSkipped,    // not imported, for a reason that is not an error (duplicate axes, over the cap)
  kError,      // the dump is malformed or violates its definition
};
std::string_view outcome_name(Outcome o);  // "added", "unchanged", "kept", "skipped", "error"

struct FileReport {
  std::string file;  // the dump file (or call folder), relative to the dump folder
  Outcome outcome = Outcome::kAdded;
  std::string definition;  // the definition it became or was matched to, when known
  std::string target;      // what was written, relative to the dataset root
  // Repairs made on the way in (definitions), or why the outcome is what it is: for kError,
  // "JSON path: what is wrong (expected ...)".
  std::vector<std::string> notes;
};

struct Report {
  std::vector<FileReport> files;  // in dump-file order
  std::size_t count(Outcome o) const;
  bool has_errors() const { return count(Outcome::kError) > 0; }
};

// "added 3, unchanged 1, ..." and one line per file with its notes.
std::string render_text(const Report& r);

// --tags "model:llama-3-8b,tp:8,ep:1": workflow tags the dumper does not emit. Each must be
// "key:value" with key one of model, tp, ep; tp and ep take a positive integer. Throws
// fib::Error naming the bad tag.
std::vector<std::string> parse_workflow_tags(std::string_view text);

// The repairs FlashInfer's dumps need before fib reads them, applied to `j` in place; returns one
// note per change (empty: none). A change that cannot be made (an `unknown` dtype on a tensor that
// is not a plan-time index) is left for the schema check to report.
std::vector<std::string> repair_definition(Json& j);

struct DefinitionImportOptions {
  std::vector<std::string> tags;  // added to every definition that lacks them
};
// Imports every *.json directly in `dump_dir` into `dataset` (created when absent).
Report import_definitions(const std::filesystem::path& dump_dir,
                          const std::filesystem::path& dataset,
                          const DefinitionImportOptions& options);

struct WorkloadImportOptions {
  std::size_t max_per_definition = 8;  // distinct-axes workloads kept per definition
  // The Python that reads .pt dumps (torch.load(weights_only=True)) inside bubblewrap.
  std::string python = "/usr/bin/python3";
  std::string bwrap = "bwrap";
};
// Imports every call folder of a level-10 dump (`dump_dir`/<timestamp>_pid<N>_<api>_call<K>/)
// as a workload of the dataset definition whose fi_api tag names the call's API and whose
// const axes and dtypes the call's tensors fit.
Report import_workloads(const std::filesystem::path& dump_dir, const std::filesystem::path& dataset,
                        const WorkloadImportOptions& options);

}  // namespace fib::import
