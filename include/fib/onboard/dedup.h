// Deduplication by the FlashInfer-Trace identity rule: two definitions are the same kernel when
// they have the same op_type, the same axes (roles and const values) and the same inputs and
// outputs (names, order, shapes, dtypes). Names, descriptions, tags and reference texts do not
// count. One guard keeps different math apart: when two definitions of one identity have
// different reference texts, fib's native CPU references of both run on the same small seeded
// inputs (compare_math), and different outputs make them interface twins, not one kernel.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fib/trace/definition.h"

namespace fib::onboard {

// Whether a and b are the same kernel; when not, `difference` (if given) says what differs first
// ("input 'kv_last_page_len' shape [len_indptr] vs [batch_size]").
bool same_kernel(const Definition& a, const Definition& b, std::string* difference = nullptr);

// A canonical text of the interface (op_type, sorted axes, ordered inputs/outputs): the identity
// key. Equal fingerprints mean same_kernel. The name is not part of it.
std::string interface_fingerprint(const Definition& d);

// Tags with these prefixes are what onboarding adds to an existing definition it shares.
bool is_sharing_tag(std::string_view tag);  // model:, tp:, ep:

// The tags of `wanted` (sharing tags only) that `existing` lacks, in `wanted` order.
std::vector<std::string> missing_sharing_tags(const Definition& existing,
                                              const std::vector<std::string>& wanted);

// What running two definitions of one identity through fib's native references showed.
enum class MathVerdict : std::uint8_t {
  kSame,         // every output equal within about one rounding of its dtype
  kDifferent,    // some output differs by more: different math behind one interface
  kNotCompared,  // a native reference cannot run one of them (or no inputs could be made)
};
std::string_view math_verdict_name(MathVerdict v);

struct MathComparison {
  MathVerdict verdict = MathVerdict::kNotCompared;
  double max_abs_diff = 0;  // the largest |a - b| over every output (kSame, kDifferent)
  std::string output;       // the output where it is (kDifferent: the first failing one)
  std::string detail;       // kNotCompared: why; otherwise the inputs used ("seq_len=7, ...")
};

// Runs the native CPU reference (fib::reference::run) of `a` and of `b` on the same inputs: one
// small workload from fib's workload synthesis (at most 8 tokens, KV of at most 96 tokens) and
// its seeded input synthesis (valid indices, page tables, routing). Both definitions must have
// the same interface (same_kernel); large MoE and GEMM sizes are shrunk the same way on both
// sides (expert counts, top_k and routing groups keep their values), since the native kernels
// read sizes from the axes. Tolerance per element: |a - b| <= atol + rtol * |b| with rtol one
// unit in the last place of the output dtype (bf16 2^-7, fp16 2^-10, fp32 2^-20) and atol 1e-6;
// integer outputs exactly; NaN only against NaN.
MathComparison compare_math(const Definition& a, const Definition& b);

}  // namespace fib::onboard
