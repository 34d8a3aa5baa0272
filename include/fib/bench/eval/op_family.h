// What `fib run` knows about each op type, in one place per op type: the correctness policy,
// the built-in tolerances and policy extras, the roofline rule, and the special cases of the
// judge (a top-k scorer) and of the reference worker (the sampling expectation). Each op type of
// fib/trace/op_types.def has an entry: src/bench/eval/families/<op_type>.cpp where the list gives
// it a family of its own, the default family otherwise; op_family() finds it by the definition's
// op_type, and where one op type holds several interfaces (dsa_paged's top-k indexer and sparse
// attention), the entry tells them apart by the definition's inputs and outputs, never by its
// name. docs/architecture.md ("Adding an op type") lists every other place an op type touches.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fib/bench/eval/compare.h"
#include "fib/bench/eval/eval_config.h"
#include "fib/reference/reference.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/definition.h"
#include "fib/trace/workload.h"

#ifdef FIB_HAVE_CUDA
#include "fib/cuda/roofline.h"
#endif

namespace fib::bench {

// The arithmetic a call's FLOPs run on (mirrors cuda::MathKind, so that this header and the
// rules need no CUDA).
enum class RooflineMath : std::uint8_t { kBf16Tensor, kFp16Tensor, kFp8Tensor, kTf32Tensor, kFp32 };

// What a call must at least do, where the op type says it: the bytes it must move through DRAM
// and the FLOPs it must compute. Unknown parts stay empty (no roofline for them).
struct RooflineDemand {
  std::optional<double> bytes;
  std::optional<double> flops;
  RooflineMath math = RooflineMath::kBf16Tensor;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct OpFamily {
  std::string_view op_type;  // empty for the family of op types fib does not know
  // The correctness policy of a definition of this op type.
  EvalPolicy (*policy)(const Definition& def) = nullptr;
  // The built-in op_type_config layer (tolerances, policy extras); empty settings add none.
  EvalSettings (*builtin_eval)() = nullptr;
  // The roofline demand under the definition's axes bound for one workload; null: the op type
  // declares nothing (it reads only part of its inputs: paged caches, routed experts).
  RooflineDemand (*roofline)(const Definition& def, const AxisValues& bound) = nullptr;
  // kTopkSet: the score of a candidate index, so that a tie broken the other way passes; null,
  // or nullopt for a definition it cannot score: sets must match exactly.
  std::optional<RowScorer> (*row_scorer)(const Definition& def,
                                         const reference::Arguments& args) = nullptr;
  // Tensors the reference side adds to its outputs for the judge (sampling: the distribution
  // the draws are tested against); null: none.
  void (*reference_extras)(const Definition& def, const reference::Arguments& args,
                           const Json& eval_extra, NamedTensors* outputs) = nullptr;
  // Whether a definition's outputs are random draws, judged by many draws on one input set
  // rather than call by call; null: never.
  bool (*samples)(const Definition& def) = nullptr;
};

// Whether def's outputs are draws (its family's `samples` says so).
bool samples_draws(const Definition& def);

// The entry of def.op_type; the elementwise family (op_type "") for op types fib does not know.
const OpFamily& op_family(const Definition& def);
// The entry registered for `op_type`, or null.
const OpFamily* find_op_family(std::string_view op_type);
// Every registered entry, in op_type order.
std::span<const OpFamily* const> op_families();

// op_family(def).roofline under the workload's axes; empty when an axis is unbound.
RooflineDemand roofline_demand(const Definition& def, const Workload& w);
#ifdef FIB_HAVE_CUDA
// roofline_demand as the CUDA roofline's input for a call of median time `median_ms`.
cuda::RooflineInput roofline_input_for(const Definition& def, const Workload& w, double median_ms);
#endif

// op_family(def).reference_extras for one input set (nothing for op types without extras).
void append_reference_extras(const Definition& def, const reference::Arguments& args,
                             const Json& eval_extra, NamedTensors* outputs);

// The output names reference_extras adds for a sampling family, and their inverse: the
// expectation the judge reads back out of the reference's outputs (removing those entries).
inline constexpr std::string_view kDistributionOutput = "__distribution";
inline constexpr std::string_view kAllowedOutput = "__allowed";
SamplingExpectation take_sampling_expectation(Outputs& reference_outputs);

// The interfaces of dsa_paged: the top-k indexer returns indices only (every output an integer
// tensor); sparse attention returns attention outputs.
enum class DsaInterface : std::uint8_t { kTopkIndexer, kSparseAttention };
DsaInterface dsa_interface(const Definition& def);

}  // namespace fib::bench
