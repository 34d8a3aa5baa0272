// Evaluation settings of `fib run` (trial counts, tolerances, policy extras), layered as in
// upstream FlashInfer-Bench's eval_config.yaml, plus fib's output-dtype layer and NMSE bound.
//
// Layers, lowest priority first; each kind of layer is the built-in one, then the user's file:
//   1. defaults               (built-in top level)
//   2. dtype_config[<dtype>]  (keyed by the output's dtype name: int32, bfloat16, ...)
//   3. op_type_config[<op>]   (keyed by the definition's op_type)
//   4. definition_config[<n>] (keyed by the definition's name)
//   5. the user file's top level (upstream: top-level fields override everything, PR #411)
//   6. command-line flags
// A field left out of a layer keeps the value from below; `extra` objects merge key by key.
//
// Two exceptions keep index outputs exact: for integer and bool outputs, rtol/atol come only
// from the dtype layers (built-in: exact), so `--atol 1e-3` or `definition_config: {x: {rtol:
// ...}}` loosens floating outputs only. And dtype_config holds tolerances only (rtol, atol,
// required_matched_ratio, max_nmse); trial counts are per definition.
//
// The YAML file (docs/correctness.md has the full reference):
//
//   warmup_runs: 10          # top level: highest priority after the command line
//   rtol: 0.01
//   dtype_config:
//     float8_e4m3fn: {rtol: 0.125}
//   op_type_config:
//     moe: {required_matched_ratio: 0.95}
//     sampling: {extra: {sampling_validation_trials: 100, sampling_tvd_threshold: 0.2}}
//   definition_config:
//     rmsnorm_h4096: {atol: 0.001}
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fib/base/diagnostics.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"

namespace fib::bench {

// One layer: every field optional.
struct EvalSettings {
  std::optional<int> warmup_runs;                // >= 0
  std::optional<int> iterations;                 // >= 1
  std::optional<int> num_trials;                 // >= 1: checked calls, each with fresh inputs
  std::optional<double> rtol;                    // >= 0
  std::optional<double> atol;                    // >= 0
  std::optional<double> required_matched_ratio;  // in (0, 1]
  std::optional<double> max_nmse;                // >= 0 (.inf disables the aggregate check)
  Json extra = Json::object();  // policy parameters (kExtraKeys); merged key by key

  bool empty() const;
};

// The `extra` keys fib knows (anything else is an error, with a suggestion):
//   sampling_validation_trials  int > 0      calls whose draws must all be in the support
//   sampling_draws_per_row      int > 0      draws per row the distribution test wants
//   sampling_tvd_threshold      [0, 1]       TVD floor (upstream: the bound itself)
//   sampling_chi2_alpha         (0, 1)       false-failure rate of the chi-square test
//   sampling_top_p_epsilon      >= 0         top_p boundary tolerance of the support check
//   topk_score_rtol / _atol     >= 0         when two top-k picks count as tied
std::span<const std::string_view> eval_extra_keys();

struct EvalConfigFile {
  std::string origin;  // the file it came from ("built-in" for builtin_eval_config())
  EvalSettings top;
  std::map<std::string, EvalSettings, std::less<>> dtype;  // by dtype name
  std::map<std::string, EvalSettings, std::less<>> op_type;
  std::map<std::string, EvalSettings, std::less<>> definition;
};

// fib's compiled-in layers (docs/correctness.md lists them):
//   top:      warmup_runs 10, iterations 50, num_trials 3, rtol 1e-2, atol 1e-2, max_nmse 1e-2
//   dtype:    int8/int16/int32/int64/uint8/bool: rtol 0, atol 0 (exact);
//             float8_e4m3fn rtol 0.125, float8_e5m2 rtol 0.25, float4_e2m1 rtol 0.5 atol 0.5
//             (one unit in the last place of the output format)
//   op_type:  each op family's builtin_eval (fib/bench/eval/op_family.h), today:
//             moe: required_matched_ratio 0.95, max_nmse 0.1;
//             sampling: extra {sampling_validation_trials 100, sampling_tvd_threshold 0.2,
//                              sampling_draws_per_row 100000, sampling_chi2_alpha 1e-6,
//                              sampling_top_p_epsilon 1e-3};
//             dsa_paged: extra {topk_score_rtol 1e-2, topk_score_atol 1e-6};
//             quantization: rtol 0.125, atol 2^-9, max_nmse 1e-4
EvalConfigFile builtin_eval_config();

// Reads a YAML eval config. Throws fib::Error listing every problem, each as
// "FILE:LINE: $.key.path: error: message (hint)": unknown keys (with a did-you-mean), values
// of the wrong type, out-of-range values (negative tolerances, ratios outside (0, 1]), unknown
// dtype names, and YAML syntax errors. An empty file is an empty config. Upstream's deprecated
// per-layer fields sampling_validation_trials / sampling_tvd_threshold are read into `extra`.
EvalConfigFile load_eval_config(const std::filesystem::path& yaml);
// The same from text; `origin` names it in messages.
EvalConfigFile parse_eval_config(std::string_view yaml_text, const std::string& origin);

// Checks one layer built by other means (command-line flags); throws fib::Error naming
// `origin` and the field.
void check_eval_settings(const EvalSettings& s, const std::string& origin);

// Warnings for op_type_config / definition_config keys that name nothing the dataset has (a
// typo there silently does nothing), with suggestions.
Diagnostics check_eval_config_names(const EvalConfigFile& cfg,
                                    std::span<const std::string> op_types,
                                    std::span<const std::string> definitions);

// Settings for one output of one definition after layering.
struct ResolvedEval {
  int warmup_runs = 10;
  int iterations = 50;
  int num_trials = 3;
  double rtol = 1e-2;
  double atol = 1e-2;
  std::optional<double> required_matched_ratio;
  double max_nmse = 1e-2;
  Json extra = Json::object();
  // Which layer set each field, for the trace log: "warmup_runs=10 (default); rtol=0.001
  // (definition_config.rmsnorm_h4096 in eval.yaml); ..."
  std::string sources;

  // extra[key] as a number / integer, or `fallback` when absent.
  double extra_number(std::string_view key, double fallback) const;
  std::int64_t extra_int(std::string_view key, std::int64_t fallback) const;
};

// Resolves the layers for output `output_name` of `def` (empty: the definition as a whole,
// without the dtype layer, for trial counts and policy extras). `user` may be null. Throws
// fib::Error when `output_name` is not an output of `def`.
ResolvedEval resolve_eval(const EvalConfigFile& builtin, const EvalConfigFile* user,
                          const EvalSettings& cli, const Definition& def,
                          std::string_view output_name);

// Every output of `def`, by name.
std::map<std::string, ResolvedEval, std::less<>> resolve_eval_outputs(const EvalConfigFile& builtin,
                                                                      const EvalConfigFile* user,
                                                                      const EvalSettings& cli,
                                                                      const Definition& def);

// The resolved values as JSON (for a trace's correctness extra or a log).
Json to_json(const ResolvedEval& r);

}  // namespace fib::bench
