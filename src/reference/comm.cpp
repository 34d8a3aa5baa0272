// comm: the collectives over world_size shards held by one device, told apart by ranks:
//   input [W, T, H] -> output [T, H]        all_reduce: the sum over ranks (fp32, one rounding)
//   input [W, T, H] -> output [T, W, H]     all_gather: output[t, r] = input[r, t]
//   input [W, W, T, H] -> output [W, T, H]  reduce_scatter: output[r] = sum_s input[s, r]
//   input [W, W, T, H] -> output [W, W, T, H]  all_to_all: output[d, s] = input[s, d]
#include <fmt/format.h>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

class Comm final : public Kernel {
 public:
  std::string_view id() const override { return "comm"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "comm") return false;
    const TensorSpec* in = def.input("input");
    const TensorSpec* out = def.output("output");
    const std::size_t ri = in && in->shape ? in->shape->size() : 0;
    const std::size_t ro = out && out->shape ? out->shape->size() : 0;
    if (!((ri == 3 && (ro == 2 || ro == 3)) || (ri == 4 && (ro == 3 || ro == 4)))) {
      *why =
          "expects input [world_size, num_tokens, hidden] -> output [num_tokens, hidden] "
          "(all_reduce) or [num_tokens, world_size, hidden] (all_gather), or input "
          "[world_size, world_size, num_tokens, hidden] -> output [world_size, num_tokens, "
          "hidden] (reduce_scatter) or [world_size, world_size, num_tokens, hidden] (all_to_all)";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Tensor& in = args.tensor("input");
    Tensor out = make_output(ctx, "output");
    const std::int64_t w = in.dim(0);
    const std::int64_t row = in.dim(in.rank() - 1) * in.dim(in.rank() - 2);  // T * H per shard
    const Floats x(in);
    std::vector<float> y(static_cast<std::size_t>(out.numel()));
    if (in.rank() == out.rank() + 1) {
      // all_reduce and reduce_scatter: sum over the leading rank axis, in rank order.
      const std::int64_t n = out.numel();
      for (std::int64_t s = 0; s < w; ++s) {
        for (std::int64_t i = 0; i < n; ++i)
          y[static_cast<std::size_t>(i)] += x[static_cast<std::size_t>(s * n + i)];
      }
    } else if (in.rank() == 3) {
      // all_gather: output[t, r] = input[r, t].
      const std::int64_t t_count = in.dim(1), h = in.dim(2);
      for (std::int64_t r = 0; r < w; ++r) {
        for (std::int64_t t = 0; t < t_count; ++t) {
          for (std::int64_t i = 0; i < h; ++i)
            y[static_cast<std::size_t>((t * w + r) * h + i)] =
                x[static_cast<std::size_t>((r * t_count + t) * h + i)];
        }
      }
    } else {
      // all_to_all: output[d, s] = input[s, d].
      for (std::int64_t s = 0; s < w; ++s) {
        for (std::int64_t d = 0; d < w; ++d) {
          for (std::int64_t i = 0; i < row; ++i)
            y[static_cast<std::size_t>((d * w + s) * row + i)] =
                x[static_cast<std::size_t>((s * w + d) * row + i)];
        }
      }
    }
    store_floats(y, out);
    Outputs o;
    o.emplace("output", std::move(out));
    return o;
  }
};

}  // namespace

void add_comm(KernelList& list) { list.push_back(std::make_unique<Comm>()); }

}  // namespace fib::reference::detail
