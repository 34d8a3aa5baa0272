// Correctness verdicts of `fib run`: how a solution's outputs for one call are compared with
// the reference's (pure functions: no processes, no devices), how trials merge, and the
// per-definition policy (elementwise, matched ratio, top-k sets, sampling statistics).
// docs/correctness.md explains every rule and its math.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fib/bench/eval/eval_config.h"
#include "fib/reference/reference.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/definition.h"
#include "fib/trace/trace.h"

namespace fib::bench {

using Outputs = reference::Outputs;                                    // by output name
using OutputEvals = std::map<std::string, ResolvedEval, std::less<>>;  // resolve_eval_outputs()

// ---- Policy ------------------------------------------------------------------------------

enum class PolicyKind : std::uint8_t {
  kElementwise,   // every element within atol or rtol, no new NaN/Inf, NMSE bound
  kMatchedRatio,  // the same, but a fraction of elements may miss (low-bit MoE)
  kTopkSet,       // index outputs compared row by row as sets (ties by score allowed)
  kSampling,      // support membership plus a distribution test over many draws
  kCanonical,     // both sides brought to the op family's canonical form, then elementwise
};
std::string_view policy_name(PolicyKind k);  // "elementwise", "matched_ratio", ...

struct EvalPolicy {
  PolicyKind kind = PolicyKind::kElementwise;
  std::vector<std::string> set_outputs;       // kTopkSet: the outputs compared as sets
  std::vector<std::string> optional_outputs;  // a solution may leave these out
  // kMatchedRatio: the ratio used when the config sets none (upstream's LowBit default).
  std::optional<double> default_matched_ratio;
  // kCanonical: rewrites one side's outputs (already of the definition's shapes and dtypes)
  // into a form where every correct solution agrees with the reference elementwise: an order
  // the interface leaves open sorted, entries it leaves unspecified set to a fixed value.
  void (*canonicalize)(const Definition& def, Outputs& outputs) = nullptr;
};

// The policy of a definition: its op type's entry in the op family registry decides
// (fib/bench/eval/op_family.h; src/bench/eval/families/<op_type>.cpp). Today: sampling ->
// kSampling; dsa_paged's top-k indexer (integer outputs) -> kTopkSet on its integer outputs, its
// sparse attention -> kElementwise with `lse` optional; moe -> kMatchedRatio (default 0.95);
// moe_routing and moe_align -> kCanonical; every other op type, known or not -> kElementwise.
EvalPolicy policy_for(const Definition& def);

// ---- Verdicts ----------------------------------------------------------------------------

struct CallVerdict {
  EvaluationStatus status = EvaluationStatus::kPassed;
  double max_abs_error = 0;  // +inf when a NaN/Inf mismatch or an unpaired index failed
  double max_rel_error = 0;
  // matched_ratio, nmse, mismatches, numel, nan, inf, unwritten, first_mismatch {output,
  // index, expected, got}, per-output details ("outputs") when there are several.
  Json extra = Json::object();
  std::string log;  // empty when passed; a few lines saying where it failed otherwise

  bool passed() const { return status == EvaluationStatus::kPassed; }
};

// What the harness filled each output with before the call, by output name: the integer
// sentinel for integer outputs, NaN for float outputs poisoned with NaN. A failing element that
// still holds it is reported as never written.
using PoisonValues = std::map<std::string, double, std::less<>>;

// Score of candidate `index` in row `row` of a top-k output (higher is better); NaN when
// `index` is not a valid candidate of that row (unreachable, out of range).
using RowScorer = std::function<double(std::int64_t row, std::int64_t index)>;

struct CompareOptions {
  const PoisonValues* poison = nullptr;
  const RowScorer* scorer = nullptr;  // kTopkSet: accept a different index of equal score
};

// Structural checks only: every non-optional output present (INCORRECT_SHAPE otherwise), no
// output the definition lacks (INCORRECT_SHAPE), shapes equal to the reference's
// (INCORRECT_SHAPE), dtypes equal to the definition's (INCORRECT_DTYPE). The first problem in
// output order sets the status; the log lists all of them.
CallVerdict check_output_structure(const Definition& def, const EvalPolicy& policy,
                                   const Outputs& expected, const Outputs& got);

// One call: structure, then each output by the policy (compare_tensor or compare_topk_sets).
// `evals` needs an entry for every output. Throws fib::Error for a kSampling policy (draws are
// judged together by check_sampling) and when the reference lacks an output.
CallVerdict compare_outputs(const Definition& def, const EvalPolicy& policy,
                            const OutputEvals& evals, const Outputs& expected, const Outputs& got,
                            const CompareOptions& options = {});

// One output, elementwise, in double precision (shapes and dtypes must already agree):
// - the reference's NaN accepts anything; its +-Inf needs the same Inf; a NaN or Inf the
//   reference does not have fails, whatever the matched ratio;
// - a finite element fails only if |got - ref| > atol AND |got - ref| / (|ref| + 1e-8) > rtol;
// - with a required matched ratio, up to (1 - ratio) of the elements may fail that test;
// - float outputs: NMSE = sum (got - ref)^2 / sum ref^2 must be <= max_nmse (skipped when the
//   reference is all zeros); integer and bool outputs under rtol = atol = 0 compare exactly.
// `poison` is the value the output held before the call, if known.
CallVerdict compare_tensor(std::string_view name, const ResolvedEval& cfg, const Tensor& expected,
                           const Tensor& got, std::optional<double> poison = std::nullopt);

// One index output whose rows are sets (the last dimension is the set; -1 is padding, ignored):
// a row passes when its indices equal the reference's as a set. With a scorer, a row whose
// extra indices pair up (both sorted by score) with its missing ones within
// topk_score_atol + topk_score_rtol * |score| (cfg.extra; defaults 1e-6 and 1e-2) also passes:
// a tie broken the other way. Duplicates, values below -1 and a different count fail.
// `poison` (the value the output held before the call) makes never-written entries say so.
CallVerdict compare_topk_sets(std::string_view name, const ResolvedEval& cfg,
                              const Tensor& expected, const Tensor& got,
                              const RowScorer* scorer = nullptr,
                              std::optional<double> poison = std::nullopt);

// The score the DSA top-k indexer ranks by (sum_h relu(q[b,h] . K[token]) * weights[b,h], in
// double), for global token indices (page * page_size + offset) reachable through row b's
// block_table and seq_lens; NaN for any other index. Throws fib::Error when `def` is not
// dsa_paged's top-k indexer (dsa_interface) or an input is missing.
RowScorer dsa_topk_indexer_scorer(const Definition& def, const reference::Arguments& args);

// ---- Trials ------------------------------------------------------------------------------

// Severity order used to merge: PASSED < INCORRECT_NUMERICAL < INCORRECT_DTYPE <
// INCORRECT_SHAPE < RUNTIME_ERROR < TIMEOUT < COMPILE_ERROR.
int status_severity(EvaluationStatus s);

struct TrialVerdict {
  int trial = 0;
  std::uint64_t seed = 0;  // the inputs' seed, so the failure reproduces
  CallVerdict verdict;
};

// The worst status wins; max errors are the max over trials, matched_ratio the min, nmse the
// max; the log is that of the first trial with the worst status, headed by its index and seed,
// followed by a line naming the other failed trials. extra gains trials, failed_trials and
// (on failure) trial and seed.
CallVerdict merge_trials(std::span<const TrialVerdict> trials);

// The trace record's correctness block for a verdict.
Correctness to_correctness(const CallVerdict& v);

// ---- Sampling ----------------------------------------------------------------------------

struct SamplingExpectation {
  Tensor distribution;  // [batch, vocab] float32, rows summing to 1: what the reference draws
  Tensor allowed;       // [batch, vocab] bool: tokens a correct sampler may draw; undefined:
                        // exactly those with distribution > 0
};

// The reference's distribution (reference::sampling_distribution) and the tokens a correct
// sampler may draw: its support, plus tokens tied in probability with the last one the top_k /
// top_p cut keeps, plus tokens within sampling_top_p_epsilon (cfg.extra) of the top_p
// boundary, where float32 cumulative sums legitimately differ. Throws like
// sampling_distribution.
SamplingExpectation sampling_expectation(const Definition& def, const reference::Arguments& args,
                                         const ResolvedEval& cfg);

// Judges draws of a sampling solution: `samples` is [batch, draws] (or [batch] for one draw per
// row) of an integer dtype, row r drawn from row r of the expectation. Fails
// (INCORRECT_NUMERICAL) when a draw is outside [0, vocab) or not allowed, or a row's draws do
// not follow the distribution: a chi-square test on bins of equal expected mass rejects at
// sampling_chi2_alpha / batch, or the total-variation distance exceeds
// max(sampling_tvd_threshold, E[TVD] + 6 sd[TVD]) of a correct sampler with as many draws.
// INCORRECT_SHAPE when `samples` is not [batch, draws].
CallVerdict check_sampling(const Definition& def, const ResolvedEval& cfg,
                           const SamplingExpectation& expected, const Tensor& samples);

// P(X >= x) for X chi-square distributed with `dof` degrees of freedom.
double chi_square_survival(double x, int dof);

}  // namespace fib::bench
