// rope: rotary embedding from a cos/sin cache, partial rotary, as the references compute it in
// fp32 and round once to the output dtype:
//   cos, sin = cos_sin_cache[positions].chunk(2)        (first rotary_dim/2 columns are cos)
//   NeoX (half split):   x1, x2 = x[..., :rotary_dim/2], x[..., rotary_dim/2:rotary_dim]
//                        out = cat(x1*cos - x2*sin, x2*cos + x1*sin, x[..., rotary_dim:])
//   GPT-J (interleaved): x1, x2 = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]
//                        out[2i] = x1*cos - x2*sin, out[2i+1] = x2*cos + x1*sin (then the tail)
// for q and k alike. The interface cannot tell the two apart; the reference text and the name
// do (rope_style below). head_size comes from the tensors, rotary_dim from its axis (the cache's
// width when there is no such axis). Positions index the cache as Python does (negative counts
// from the end); anything else out of range is an error.
#include <fmt/format.h>

#include <regex>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

bool shaped(const TensorSpec* s, std::size_t rank) {
  return s && s->shape && s->shape->size() == rank;
}

}  // namespace

RopeStyle rope_style(const Definition& def) {
  // A slice with a step of 2 (`x[..., ::2]`, `x[..., 1:rotary_dim:2]`) pairs adjacent elements:
  // the text is the math, so it decides first.
  static const std::regex kStepTwo(R"(:[^\[\]:,\n]*:\s*2\s*\])");
  if (std::regex_search(def.reference, kStepTwo)) return RopeStyle::kInterleaved;
  // Otherwise the dataset's naming says it (`..._gptj_style_...`); NeoX is the default.
  if (name_has(def, "gptj") || name_has(def, "interleave")) return RopeStyle::kInterleaved;
  return RopeStyle::kHalfSplit;
}

namespace {

class Rope final : public Kernel {
 public:
  std::string_view id() const override { return "rope"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "rope") return false;
    if (!shaped(def.input("q"), 3) || !shaped(def.input("k"), 3) ||
        !shaped(def.input("cos_sin_cache"), 2) || !shaped(def.input("positions"), 1) ||
        !def.output("q_out") || !def.output("k_out")) {
      *why =
          "expects q [tokens, heads, head_size], k [tokens, kv_heads, head_size], cos_sin_cache "
          "[max_seq_len, "
          "rotary_dim], positions [tokens] -> q_out, k_out";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Definition& def = ctx.definition;
    const Tensor& q_t = args.tensor("q");
    const Tensor& k_t = args.tensor("k");
    const Tensor& cache_t = args.tensor("cos_sin_cache");
    const Tensor& pos_t = args.tensor("positions");
    const std::int64_t tokens = q_t.dim(0), head = q_t.dim(2), rows = cache_t.dim(0);
    const std::int64_t rot = axis_value(ctx.axes, "rotary_dim").value_or(cache_t.dim(1));
    if (rot % 2 != 0 || rot > head || cache_t.dim(1) != rot || k_t.dim(2) != head) {
      throw Error(
          def.name,
          fmt::format("rotary_dim {} must be even, at most head_size {} and the cache's width {}",
                      rot, head, cache_t.dim(1)));
    }
    const std::int64_t half = rot / 2;
    // Pair i is dims (i, half + i) in NeoX style and (2i, 2i + 1) in GPT-J style; both use
    // cos[i] and sin[i].
    const bool interleaved = rope_style(def) == RopeStyle::kInterleaved;
    const Floats cache(cache_t);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) {
      std::int64_t p = static_cast<std::int64_t>(pos_t.get(t));
      if (p < 0) p += rows;
      if (p < 0 || p >= rows) {
        throw Error(def.name, fmt::format("positions[{}] = {} is outside the cache of {} rows", t,
                                          static_cast<std::int64_t>(pos_t.get(t)), rows));
      }
      pos[static_cast<std::size_t>(t)] = p;
    }
    Outputs out;
    for (const auto& [in_name, out_name] : {std::pair{"q", "q_out"}, std::pair{"k", "k_out"}}) {
      const Tensor& x_t = args.tensor(in_name);
      const std::int64_t heads = x_t.dim(1);
      Tensor o = make_output(ctx, out_name);
      // A (token, head) row at a time: converted in, rotated, rounded into the output; the
      // pass-through part stays as it is.
      parallel_for(tokens, ctx.threads, 64, [&](std::int64_t t0, std::int64_t t1) {
        std::vector<float> xr(static_cast<std::size_t>(head)), yr(static_cast<std::size_t>(head));
        for (std::int64_t t = t0; t < t1; ++t) {
          const float* cs = cache.data() + pos[static_cast<std::size_t>(t)] * rot;
          for (std::int64_t h = 0; h < heads; ++h) {
            load_floats(x_t, (t * heads + h) * head, head, xr.data());
            yr = xr;
            for (std::int64_t i = 0; i < half; ++i) {
              const auto u = static_cast<std::size_t>(interleaved ? 2 * i : i);
              const auto v = static_cast<std::size_t>(interleaved ? 2 * i + 1 : half + i);
              const float c = cs[i], s = cs[half + i], x1 = xr[u], x2 = xr[v];
              yr[u] = x1 * c - x2 * s;
              yr[v] = x2 * c + x1 * s;
            }
            store_floats(yr.data(), head, o, (t * heads + h) * head);
          }
        }
      });
      out.emplace(out_name, std::move(o));
    }
    return out;
  }
};

}  // namespace

// NeoX (half split) and GPT-J (interleaved) pairs.
void add_rope(KernelList& list) { list.push_back(std::make_unique<Rope>()); }

}  // namespace fib::reference::detail
