// embedding: output[t, :] = weight[input_ids[t], :], the row copied as it is (converted where
// the output's dtype differs from the table's). An id outside [0, vocab_size) is an error
// naming the token.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

class Embedding final : public Kernel {
 public:
  std::string_view id() const override { return "embedding"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "embedding") return false;
    if (!def.input("input_ids") || !def.input("weight") || !def.output("output") ||
        !def.axis("num_tokens") || !def.axis("vocab_size") || !def.axis("hidden_size")) {
      *why =
          "expects input_ids [num_tokens], weight [vocab_size, hidden_size] -> output "
          "[num_tokens, hidden_size]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const std::int64_t tokens = axis(ctx, "num_tokens"), vocab = axis(ctx, "vocab_size"),
                       h = axis(ctx, "hidden_size");
    const Tensor& ids = args.tensor("input_ids");
    const Tensor& weight = args.tensor("weight");
    Tensor out = make_output(ctx, "output");
    std::vector<std::int64_t> rows(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) {
      const auto id = static_cast<std::int64_t>(ids.get(t));
      if (id < 0 || id >= vocab) {
        throw Error(
            ctx.definition.name,
            fmt::format("input_ids[{}] = {} is outside the vocabulary [0, {})", t, id, vocab),
            "every token id must name a row of weight");
      }
      rows[static_cast<std::size_t>(t)] = id;
    }
    const bool same = weight.dtype() == out.dtype();
    const std::size_t row_bytes =
        weight.nbytes() / static_cast<std::size_t>(std::max<std::int64_t>(vocab, 1));
    parallel_for(tokens, ctx.threads, 64, [&](std::int64_t begin, std::int64_t end) {
      std::vector<float> x(same ? 0 : static_cast<std::size_t>(h));
      for (std::int64_t t = begin; t < end; ++t) {
        const std::int64_t r = rows[static_cast<std::size_t>(t)];
        if (same) {
          std::memcpy(out.bytes().data() + static_cast<std::size_t>(t) * row_bytes,
                      weight.bytes().data() + static_cast<std::size_t>(r) * row_bytes, row_bytes);
        } else {
          load_floats(weight, r * h, h, x.data());
          store_floats(x.data(), h, out, t * h);
        }
      }
    });
    Outputs o;
    o.emplace("output", std::move(out));
    return o;
  }
};

}  // namespace

void add_embedding(KernelList& list) { list.push_back(std::make_unique<Embedding>()); }

}  // namespace fib::reference::detail
