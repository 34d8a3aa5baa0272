// moe_align: sgl-kernel's moe_align_block_size. The flattened (token, slot) indices of topk_ids
// grouped by expert (ascending index within an expert; sgl-kernel's order there is unspecified
// and the op family compares runs as sets), each expert's run padded to a multiple of
// block_size with num_tokens * top_k, one expert id per block (-1 past the padded total), and
// the padded total. Ids outside [0, num_experts) (another EP rank's experts) are left out.
#include <fmt/format.h>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

class MoeAlign final : public Kernel {
 public:
  std::string_view id() const override { return "moe_align"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "moe_align") return false;
    if (!def.input("topk_ids") || !def.output("sorted_token_ids") || !def.output("expert_ids") ||
        !def.output("num_tokens_post_pad") || !def.axis("num_experts") || !def.axis("block_size")) {
      *why =
          "expects topk_ids [num_tokens, top_k] -> sorted_token_ids, expert_ids, "
          "num_tokens_post_pad, with num_experts and block_size axes";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Tensor& topk = args.tensor("topk_ids");
    const std::int64_t e_count = axis(ctx, "num_experts"), bs = axis(ctx, "block_size");
    const std::int64_t numel = topk.numel();
    Tensor sorted = make_output(ctx, "sorted_token_ids");
    Tensor experts = make_output(ctx, "expert_ids");
    Tensor total = make_output(ctx, "num_tokens_post_pad");
    if (sorted.numel() != numel + e_count * (bs - 1)) {
      throw Error(ctx.definition.name,
                  fmt::format("sorted_token_ids holds {} entries; sgl-kernel's contract is "
                              "num_tokens * top_k + num_experts * (block_size - 1) = {}",
                              sorted.numel(), numel + e_count * (bs - 1)));
    }
    std::vector<std::vector<std::int64_t>> members(static_cast<std::size_t>(e_count));
    for (std::int64_t i = 0; i < numel; ++i) {
      const auto e = static_cast<std::int64_t>(topk.get(i));
      if (e >= 0 && e < e_count) members[static_cast<std::size_t>(e)].push_back(i);
    }
    for (std::int64_t i = 0; i < sorted.numel(); ++i) sorted.set(i, static_cast<double>(numel));
    for (std::int64_t b = 0; b < experts.numel(); ++b) experts.set(b, -1);
    std::int64_t pos = 0;
    for (std::int64_t e = 0; e < e_count; ++e) {
      const auto& m = members[static_cast<std::size_t>(e)];
      for (std::size_t j = 0; j < m.size(); ++j)
        sorted.set(pos + static_cast<std::int64_t>(j), static_cast<double>(m[j]));
      const std::int64_t blocks = (static_cast<std::int64_t>(m.size()) + bs - 1) / bs;
      for (std::int64_t b = 0; b < blocks; ++b) experts.set(pos / bs + b, static_cast<double>(e));
      pos += blocks * bs;
    }
    total.set(0, static_cast<double>(pos));
    Outputs out;
    out.emplace("sorted_token_ids", std::move(sorted));
    out.emplace("expert_ids", std::move(experts));
    out.emplace("num_tokens_post_pad", std::move(total));
    return out;
  }
};

}  // namespace

void add_moe_align(KernelList& list) { list.push_back(std::make_unique<MoeAlign>()); }

}  // namespace fib::reference::detail
