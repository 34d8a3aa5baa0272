// mamba_ssu: Mamba2 selective state update (decode), as the corpus reference computes it in fp32:
//   dt = softplus(dt + dt_bias);  dA = exp(A * dt)                    [head, head_dim, dstate]
//   s  = state[slot] * dA + (dt * x) * B[group]                       (group = head /
//   (nheads/ngroups)) new_state[slot] = s (rounded to the state dtype);  y = sum(s * C[group]) + x
//   * D
// y uses the fp32 s, before the state's rounding. A batch row whose slot is negative (PAD) is
// skipped: its output stays 0 and no slot changes; slots nobody references are copied through.
// Rows run in batch order, so two rows naming the same slot chain (the second starts from the
// first's rounded state), as the reference's loop does.
#include <fmt/format.h>

#include <array>
#include <cmath>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

std::int64_t int_at(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::kInt32:
      return t.data<std::int32_t>()[i];
    case DType::kInt64:
      return t.data<std::int64_t>()[i];
    default:
      return static_cast<std::int64_t>(t.get(i));
  }
}

bool shaped(const TensorSpec* s, std::size_t rank) {
  return s && s->shape && s->shape->size() == rank;
}

class MambaSsu final : public Kernel {
 public:
  std::string_view id() const override { return "mamba_ssu"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "mamba_ssu") return false;
    if (!shaped(def.input("state"), 4) || !shaped(def.input("x"), 3) ||
        !shaped(def.input("dt"), 3) || !shaped(def.input("A"), 3) || !shaped(def.input("B"), 3) ||
        !shaped(def.input("C"), 3) || !shaped(def.input("D"), 2) ||
        !shaped(def.input("dt_bias"), 2) || !shaped(def.input("state_batch_indices"), 1) ||
        !def.output("output") || !def.output("new_state")) {
      *why =
          "expects state [cache, nheads, head_dim, dstate], x/dt [batch, nheads, head_dim], A "
          "[nheads, head_dim, "
          "dstate], B/C [batch, ngroups, dstate], D/dt_bias [nheads, head_dim], "
          "state_batch_indices [batch]";
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Definition& def = ctx.definition;
    const Tensor& state_t = args.tensor("state");
    const Tensor& x_t = args.tensor("x");
    const Tensor& b_t = args.tensor("B");
    const Tensor& idx = args.tensor("state_batch_indices");
    const std::int64_t batch = x_t.dim(0), nheads = x_t.dim(1), hd = x_t.dim(2);
    const std::int64_t ngroups = b_t.dim(1), ds = b_t.dim(2), cache = state_t.dim(0);
    if (ngroups <= 0 || nheads % ngroups != 0) {
      throw Error(def.name,
                  fmt::format("nheads {} is not a multiple of ngroups {}", nheads, ngroups));
    }
    const std::int64_t ratio = nheads / ngroups;
    std::vector<std::int64_t> slots(static_cast<std::size_t>(batch));
    for (std::int64_t b = 0; b < batch; ++b) {
      slots[static_cast<std::size_t>(b)] = int_at(idx, b);
      if (slots[static_cast<std::size_t>(b)] >= cache) {
        throw Error(def.name,
                    fmt::format("state_batch_indices[{}] = {} is outside the cache of {} slots", b,
                                slots[static_cast<std::size_t>(b)], cache));
      }
    }
    const Floats x(x_t), dt(args.tensor("dt")), a(args.tensor("A"));
    const Floats bm(b_t), cm(args.tensor("C")), d(args.tensor("D")),
        dt_bias(args.tensor("dt_bias"));
    std::vector<float> y(static_cast<std::size_t>(batch * nheads * hd), 0.0f);
    if (state_t.dtype() != DType::kFloat32 && state_t.dtype() != DType::kBFloat16 &&
        state_t.dtype() != DType::kFloat16) {
      throw Error(def.name, fmt::format("state is {}; float32, bfloat16 or float16 expected",
                                        dtype_name(state_t.dtype())));
    }
    // new_state starts as a copy of state (slots nobody references pass through) and is updated
    // in place, one [dstate] row at a time: a later batch row on the same slot reads the rounded
    // state the earlier one stored, as the reference's loop does.
    Tensor new_state = make_output(ctx, "new_state");
    if (new_state.dtype() == state_t.dtype()) {
      std::copy(state_t.bytes().begin(), state_t.bytes().end(), new_state.bytes().begin());
    } else {
      std::vector<float> row(static_cast<std::size_t>(ds));
      for (std::int64_t r = 0; r < state_t.numel() / ds; ++r) {
        load_floats(state_t, r * ds, ds, row.data());
        store_floats(row.data(), ds, new_state, r * ds);
      }
    }
    // Heads are independent; within a head the batch rows run in order.
    parallel_for(nheads, ctx.threads, 1, [&](std::int64_t h0, std::int64_t h1) {
      std::vector<float> s(static_cast<std::size_t>(ds)), dA(static_cast<std::size_t>(ds));
      for (std::int64_t h = h0; h < h1; ++h) {
        const std::int64_t g = h / ratio;
        for (std::int64_t b = 0; b < batch; ++b) {
          const std::int64_t slot = slots[static_cast<std::size_t>(b)];
          if (slot < 0) continue;
          const float* bg = bm.data() + (b * ngroups + g) * ds;
          const float* cg = cm.data() + (b * ngroups + g) * ds;
          for (std::int64_t p = 0; p < hd; ++p) {
            const auto xi = static_cast<std::size_t>((b * nheads + h) * hd + p);
            const auto hp = static_cast<std::size_t>(h * hd + p);
            const float dtf = softplus(dt[xi] + dt_bias[hp]);
            const float dtx = dtf * x[xi];
            const std::int64_t row = ((slot * nheads + h) * hd + p) * ds;
            load_floats(new_state, row, ds, s.data());
            const float* ap = a.data() + static_cast<std::int64_t>(hp) * ds;
            for (std::int64_t n = 0; n < ds; ++n)
              dA[static_cast<std::size_t>(n)] = std::exp(ap[n] * dtf);
            std::array<float, 8> acc{};
            for (std::int64_t n = 0; n < ds; ++n) {
              const float v =
                  s[static_cast<std::size_t>(n)] * dA[static_cast<std::size_t>(n)] + dtx * bg[n];
              s[static_cast<std::size_t>(n)] = v;
              acc[static_cast<std::size_t>(n % 8)] += v * cg[n];
            }
            const float sum =
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            y[xi] = sum + x[xi] * d[hp];
            // y uses the fp32 s; the stored state is rounded to its dtype.
            store_floats(s.data(), ds, new_state, row);
          }
        }
      }
    });
    Outputs out;
    Tensor o = make_output(ctx, "output");
    store_floats(y, o);
    out.emplace("output", std::move(o));
    out.emplace("new_state", std::move(new_state));
    return out;
  }
};

}  // namespace

void add_mamba_ssu(KernelList& list) { list.push_back(std::make_unique<MambaSsu>()); }

}  // namespace fib::reference::detail
