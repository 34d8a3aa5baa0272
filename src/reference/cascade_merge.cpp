// cascade_merge (merge_state): two attention states of the same queries merged by their base-2
// log-sum-exps, in fp32 as the PyTorch reference computes it: s = s_x * ln2 for each state,
// m = max(s_a, s_b), w = exp(s - m), v = (v_a * w_a + v_b * w_b) / (w_a + w_b) rounded once to
// v_merged's dtype, s_merged = (m + log(w_a + w_b)) / ln2.
#include <algorithm>
#include <cmath>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

class MergeState final : public Kernel {
 public:
  std::string_view id() const override { return "cascade_merge"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "cascade_merge") return false;
    for (const char* in : {"v_a", "s_a", "v_b", "s_b"}) {
      if (!def.input(in)) {
        *why =
            "expects v_a, s_a, v_b, s_b ([seq_len, num_heads, head_dim] and [seq_len, "
            "num_heads]) -> v_merged, s_merged (merge_state; the in-place and many-state forms "
            "have no native reference)";
        return false;
      }
    }
    if (!def.output("v_merged") || !def.output("s_merged") || !def.axis("seq_len") ||
        !def.axis("num_heads") || !def.axis("head_dim")) {
      *why = "expects outputs v_merged and s_merged over axes seq_len, num_heads, head_dim";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t rows = axis(ctx, "seq_len") * axis(ctx, "num_heads");
    const std::int64_t d = axis(ctx, "head_dim");
    const Floats sa(args.tensor("s_a")), sb(args.tensor("s_b"));
    const Tensor& va = args.tensor("v_a");
    const Tensor& vb = args.tensor("v_b");
    Tensor v = make_output(ctx, "v_merged");
    std::vector<float> s(static_cast<std::size_t>(rows));
    const auto ln2 = static_cast<float>(std::log(2.0));
    parallel_for(rows, ctx.threads, 64, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> a(static_cast<std::size_t>(d)), b(static_cast<std::size_t>(d));
      for (std::int64_t r = begin; r < end; ++r) {
        const auto i = static_cast<std::size_t>(r);
        const float xa = sa[i] * ln2, xb = sb[i] * ln2;
        const float m = std::max(xa, xb);
        const float wa = std::exp(xa - m), wb = std::exp(xb - m);
        const float total = wa + wb;
        load_floats(va, r * d, d, a.data());
        load_floats(vb, r * d, d, b.data());
        for (std::size_t j = 0; j < a.size(); ++j) a[j] = (a[j] * wa + b[j] * wb) / total;
        store_floats(a.data(), d, v, r * d);
        s[i] = (m + std::log(total)) / ln2;
      }
    });
    Tensor s_out = make_output(ctx, "s_merged");
    store_floats(s, s_out);
    Outputs o;
    o.emplace("v_merged", std::move(v));
    o.emplace("s_merged", std::move(s_out));
    return o;
  }
};

}  // namespace

void add_cascade_merge(KernelList& list) { list.push_back(std::make_unique<MergeState>()); }

}  // namespace fib::reference::detail
