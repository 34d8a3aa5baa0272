// The registry of op families (one entry per op type of fib/trace/op_types.def: its own in
// families/<op_type>.cpp, or the default family defined here), the rules entries share, and the
// calls the run and the workers make through it.
#include "fib/bench/eval/op_family.h"

#include <algorithm>

#include "families/families.h"

namespace fib::bench {

namespace families {

EvalPolicy elementwise_policy(const Definition& /*def*/) { return {}; }

EvalSettings no_builtin_eval() { return {}; }

namespace {
std::optional<double> whole_bytes(const Definition& def, const std::vector<TensorSpec>& specs,
                                  const AxisValues& bound) {
  double bytes = 0;
  for (const auto& spec : specs) {
    if (spec.is_scalar()) continue;
    const auto shape = def.concrete_shape(spec, bound);
    if (!shape) return std::nullopt;
    std::uint64_t n = 1;
    for (auto d : *shape) n *= static_cast<std::uint64_t>(d);
    bytes += static_cast<double>(dtype_storage_bytes(spec.dtype, n).value_or(0));
  }
  return bytes;
}
}  // namespace

std::optional<double> whole_input_bytes(const Definition& def, const AxisValues& bound) {
  return whole_bytes(def, def.inputs, bound);
}

std::optional<double> whole_output_bytes(const Definition& def, const AxisValues& bound) {
  return whole_bytes(def, def.outputs, bound);
}

RooflineDemand inputs_and_outputs_whole(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  const auto in = whole_input_bytes(def, bound), out = whole_output_bytes(def, bound);
  if (in && out) d.bytes = *in + *out;
  return d;
}

// The default family of the op types op_types.def gives none of their own: elementwise within
// the default tolerances, no built-in eval layer, no roofline demand (op_types.def says why for
// each).
#define FIB_OP_TYPE(op, recipe, family, ...)                                                \
  FIB_OP_UNLESS(                                                                            \
      family, const OpFamily& op() {                                                        \
        static const OpFamily f{                                                            \
            .op_type = #op, .policy = elementwise_policy, .builtin_eval = no_builtin_eval}; \
        return f;                                                                           \
      })
#include "fib/trace/op_types.def"

namespace {
// Op types fib does not know: elementwise, the defaults, no roofline demand.
const OpFamily& unknown() {
  static const OpFamily f{
      .op_type = "", .policy = elementwise_policy, .builtin_eval = no_builtin_eval};
  return f;
}
}  // namespace

}  // namespace families

std::span<const OpFamily* const> op_families() {
  // In op_types.def's order, which is op_type order.
  static const OpFamily* const list[] = {
#define FIB_OP_TYPE(op, ...) &families::op(),
#include "fib/trace/op_types.def"
  };
  return list;
}

const OpFamily* find_op_family(std::string_view op_type) {
  for (const OpFamily* f : op_families()) {
    if (f->op_type == op_type) return f;
  }
  return nullptr;
}

const OpFamily& op_family(const Definition& def) {
  const OpFamily* f = find_op_family(def.op_type);
  return f != nullptr ? *f : families::unknown();
}

bool samples_draws(const Definition& def) {
  const OpFamily& f = op_family(def);
  return f.samples != nullptr && f.samples(def);
}

RooflineDemand roofline_demand(const Definition& def, const Workload& w) {
  const OpFamily& f = op_family(def);
  if (f.roofline == nullptr) return {};
  const auto bound = def.bind_axes(w.axes);
  if (!bound) return {};
  return f.roofline(def, *bound);
}

#ifdef FIB_HAVE_CUDA
namespace {
cuda::MathKind to_math_kind(RooflineMath m) {
  switch (m) {
    case RooflineMath::kBf16Tensor:
      return cuda::MathKind::kBf16Tensor;
    case RooflineMath::kFp16Tensor:
      return cuda::MathKind::kFp16Tensor;
    case RooflineMath::kFp8Tensor:
      return cuda::MathKind::kFp8Tensor;
    case RooflineMath::kTf32Tensor:
      return cuda::MathKind::kTf32Tensor;
    case RooflineMath::kFp32:
      return cuda::MathKind::kFp32;
  }
  return cuda::MathKind::kBf16Tensor;
}
}  // namespace

cuda::RooflineInput roofline_input_for(const Definition& def, const Workload& w, double median_ms) {
  const RooflineDemand d = roofline_demand(def, w);
  cuda::RooflineInput in;
  in.median_ms = median_ms;
  in.bytes = d.bytes;
  in.flops = d.flops;
  in.math = to_math_kind(d.math);
  return in;
}
#endif

void append_reference_extras(const Definition& def, const reference::Arguments& args,
                             const Json& eval_extra, NamedTensors* outputs) {
  const OpFamily& f = op_family(def);
  if (f.reference_extras != nullptr) f.reference_extras(def, args, eval_extra, outputs);
}

SamplingExpectation take_sampling_expectation(Outputs& reference_outputs) {
  SamplingExpectation e;
  e.distribution = reference_outputs.at(std::string(kDistributionOutput));
  if (auto it = reference_outputs.find(kAllowedOutput); it != reference_outputs.end()) {
    e.allowed = it->second;
  }
  reference_outputs.erase(std::string(kDistributionOutput));
  reference_outputs.erase(std::string(kAllowedOutput));
  return e;
}

DsaInterface dsa_interface(const Definition& def) {
  const bool indices = std::any_of(def.outputs.begin(), def.outputs.end(),
                                   [](const TensorSpec& o) { return dtype_is_integer(o.dtype); });
  return indices ? DsaInterface::kTopkIndexer : DsaInterface::kSparseAttention;
}

}  // namespace fib::bench
