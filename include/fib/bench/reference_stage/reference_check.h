// `fib reference check`: holds fib's native reference of each definition against the
// definition's own PyTorch `reference` on the same inputs (fib's structure-aware input synthesis
// from a seed, for the definition's workloads or, where it has none, a few synthesized ones),
// compared under the correctness policy and tolerances `fib run` judges solutions by (the op
// family's built-in layer: elementwise, matched ratio, top-k sets with ties scored, sampling
// support). docs/reference.md ("Checking native references against PyTorch") has the method and
// the corpus's result.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "fib/trace/json_reader.h"

namespace fib::bench {

struct ReferenceCheckOptions {
  std::uint64_t seed = 0;      // every workload's inputs derive their seed from it
  std::string device = "cpu";  // "cpu", or "cuda:N": the CUDA native reference, torch on GPU N
  std::string python;          // --python (empty: $FIB_PYTHON, else the first python3 with torch)
  std::filesystem::path python_bridge_dir;  // holds run_reference.py
  std::filesystem::path dataset_root;       // blobs are read from here
  // Per definition, at most this many workloads, the smallest (by input bytes) first; 0: all.
  std::size_t max_workloads = 0;
  // Workloads made for a definition that has none, or none whose inputs fit max_input_bytes.
  int synthesized = 2;
  // A workload whose inputs take more is left out (and counted): both references hold them.
  std::uint64_t max_input_bytes = 512ull << 20;
  unsigned threads = 0;  // of the native CPU reference and torch; 0: all cores
};

enum class CheckVerdict : std::uint8_t { kAgree, kDisagree, kError, kSkipped };
std::string_view check_verdict_name(CheckVerdict v);  // "agree", "DISAGREE", "ERROR", "skipped"

struct ReferenceCheckRow {
  std::string definition, op_type;
  std::string native;   // the native reference's id
  int workloads = 0;    // compared
  int synthesized = 0;  // of them, synthesized (the definition has no workloads)
  int disagreeing = 0;  // of them, where the references disagree
  int left_out = 0;     // workloads not compared: inputs above the cap, dtypes torch lacks
  double max_abs_error = 0, max_rel_error = 0;
  // Sampling: the PyTorch draws were checked against the native distribution's support; there
  // are no element errors.
  bool draws = false;
  CheckVerdict verdict = CheckVerdict::kSkipped;
  std::string reason;           // why it disagrees, failed or was skipped
  std::string left_out_reason;  // why workloads were left out (left_out > 0)
};

struct ReferenceCheckResult {
  std::vector<ReferenceCheckRow> rows;  // in the order of the definitions asked for
  std::string python, torch_version;
  double seconds = 0;
  bool all_agree() const;  // no row DISAGREE or ERROR
};

// Checks `defs` (definitions of `set`). `on_row` sees each row once it is complete. Throws
// fib::Error when no python3 with torch can be found or the device is unusable.
ReferenceCheckResult check_references(
    const TraceSet& set, const std::vector<const Definition*>& defs,
    const ReferenceCheckOptions& options,
    const std::function<void(const ReferenceCheckRow&)>& on_row = {});

// The table (definition, op type, workloads, max abs/rel error, verdict, reason) and a total.
std::string render_reference_check(const ReferenceCheckResult& r);
Json to_json(const ReferenceCheckResult& r);

}  // namespace fib::bench
