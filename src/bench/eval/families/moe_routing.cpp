// moe_routing (moe_fused_gate, topk_softmax, topk_sigmoid): which k experts a token gets is
// exact, but the order of the k within a row is the kernel's choice (sgl-kernel's fused gate
// writes them in selection order, the reference in expert order). Both sides' rows are sorted by
// expert id, each weight moving with its id, then compared elementwise: ids exactly, weights
// within the float32 tolerances. A call reads the logits (and bias) whole and spends a handful
// of fp32 operations per logit: the roofline's demand.
#include <algorithm>
#include <numeric>
#include <vector>

#include "families/families.h"

namespace fib::bench::families {

namespace {
void sort_rows_by_id(const Definition& /*def*/, Outputs& outputs) {
  const auto w = outputs.find("topk_weights"), ids = outputs.find("topk_ids");
  if (w == outputs.end() || ids == outputs.end() || ids->second.rank() != 2) return;
  const std::int64_t rows = ids->second.dim(0), k = ids->second.dim(1);
  if (w->second.numel() != rows * k) return;
  std::vector<std::int64_t> order(static_cast<std::size_t>(k));
  std::vector<double> id_row(order.size()), w_row(order.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < k; ++j) {
      id_row[static_cast<std::size_t>(j)] = ids->second.get(r * k + j);
      w_row[static_cast<std::size_t>(j)] = w->second.get(r * k + j);
    }
    std::iota(order.begin(), order.end(), std::int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
      return id_row[static_cast<std::size_t>(a)] < id_row[static_cast<std::size_t>(b)];
    });
    for (std::int64_t j = 0; j < k; ++j) {
      const auto from = static_cast<std::size_t>(order[static_cast<std::size_t>(j)]);
      ids->second.set(r * k + j, id_row[from]);
      w->second.set(r * k + j, w_row[from]);
    }
  }
}

EvalPolicy policy(const Definition& /*def*/) {
  EvalPolicy p;
  p.kind = PolicyKind::kCanonical;
  p.canonicalize = sort_rows_by_id;
  return p;
}

// sigmoid or exp, the bias add and the top-k comparisons: about four operations per logit.
constexpr double kFlopsPerLogit = 4.0;

RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  d.bytes = whole_input_bytes(def, bound);
  const auto t = axis_value(bound, "num_tokens"), e = axis_value(bound, "num_experts");
  if (d.bytes && t && e) {
    d.flops = kFlopsPerLogit * static_cast<double>(*t) * static_cast<double>(*e);
    d.math = RooflineMath::kFp32;
  }
  return d;
}
}  // namespace

const OpFamily& moe_routing() {
  static const OpFamily f{.op_type = "moe_routing",
                          .policy = policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
