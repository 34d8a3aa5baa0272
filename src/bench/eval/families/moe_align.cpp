// moe_align (sgl-kernel moe_align_block_size): num_tokens_post_pad and each used block's expert
// are exact, but sgl-kernel places an expert's (token, slot) entries by atomic counters, so their
// order within the expert's run is unspecified, and nothing past the padded total is written.
// The canonical form sorts each expert's run (a maximal stretch of blocks with one expert id),
// sets sorted_token_ids past the padded total to the padding value num_tokens * top_k and
// expert_ids past it to -1; then every output is compared exactly. A call reads topk_ids and
// writes both index arrays: the roofline's bytes (no FLOPs).
#include <algorithm>

#include "families/families.h"

namespace fib::bench::families {

namespace {
std::int64_t constant(const Definition& def, std::string_view name) {
  const Axis* a = def.axis(name);
  return a && a->kind == AxisKind::kConst && a->value ? *a->value : 0;
}

void canonical_runs(const Definition& def, Outputs& outputs) {
  const auto sorted = outputs.find("sorted_token_ids"), experts = outputs.find("expert_ids"),
             total = outputs.find("num_tokens_post_pad");
  if (sorted == outputs.end() || experts == outputs.end() || total == outputs.end() ||
      total->second.numel() < 1)
    return;
  Tensor& ids = sorted->second;
  Tensor& blocks = experts->second;
  const std::int64_t bs = constant(def, "block_size"), e_count = constant(def, "num_experts");
  if (bs < 1) return;
  const std::int64_t len = ids.numel(), nb = blocks.numel();
  const double pad = static_cast<double>(len - e_count * (bs - 1));
  const auto post_pad = static_cast<std::int64_t>(total->second.get(0));
  const std::int64_t used = std::clamp<std::int64_t>(post_pad / bs, 0, std::min(nb, len / bs));
  for (std::int64_t b = used; b < nb; ++b) blocks.set(b, -1);
  for (std::int64_t i = used * bs; i < len; ++i) ids.set(i, pad);
  std::vector<double> run;
  for (std::int64_t b = 0; b < used;) {
    std::int64_t end = b + 1;
    while (end < used && blocks.get(end) == blocks.get(b)) ++end;
    run.clear();
    for (std::int64_t i = b * bs; i < end * bs; ++i) run.push_back(ids.get(i));
    std::sort(run.begin(), run.end());
    for (std::int64_t i = b * bs; i < end * bs; ++i)
      ids.set(i, run[static_cast<std::size_t>(i - b * bs)]);
    b = end;
  }
}

EvalPolicy policy(const Definition& /*def*/) {
  EvalPolicy p;
  p.kind = PolicyKind::kCanonical;
  p.canonicalize = canonical_runs;
  return p;
}

RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  const auto in = whole_input_bytes(def, bound);
  const auto padded = axis_value(bound, "max_num_tokens_padded"),
             blocks = axis_value(bound, "max_num_m_blocks");
  if (in && padded && blocks)
    d.bytes = *in + 4.0 * static_cast<double>(*padded + *blocks + 1);  // int32 outputs
  return d;
}
}  // namespace

const OpFamily& moe_align() {
  static const OpFamily f{.op_type = "moe_align",
                          .policy = policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
