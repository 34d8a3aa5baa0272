// gdn: Gated Delta Net (Qwen3-Next linear attention), decode / mtp / prefill, k-last state
// layout [.., H, V, K], as the corpus references compute it (a sequential token recurrence in
// fp32; output rounded once to bf16, state kept fp32).
//
// Per token and value head h (q/k head h / (Hv / Hq), GVA), with S the [V, K] state:
//   g = exp(-exp(A_log) * softplus(a + dt_bias)),  beta = sigmoid(b)
//   S' = g * S;  old_v = S' k;  new_v = beta * v + (1 - beta) * old_v
//   S  = (S' - old_v k^T) + new_v k^T          (the reference's order of operations)
//   o  = scale * S q,  scale = 1/sqrt(K) when the input is absent or 0
// The variant follows from the interface:
//   cu_seqlens              prefill: ragged sequences; a zero-length sequence's new_state is
//                           zeros (not its input state), as in the reference.
//   initial_state_indices   mtp: each batch row starts from a pool slot; final_state is the
//                           input pool unchanged (the reference models disable_state_update=True),
//                           and the in-place intermediate_states_buffer is not an output.
//   otherwise               decode: state [B, Hv, V, K] (absent: zeros) -> new_state.
#include <fmt/format.h>

#include <array>
#include <cmath>

#include "reference/kernels.h"

namespace fib::reference::detail {

namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

float dot(const float* a, const float* b, std::int64_t n) {
  std::array<float, 8> acc{};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[static_cast<std::size_t>(j)] += a[i + j] * b[i + j];
  }
  float tail = 0.f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

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

class Gdn final : public Kernel {
 public:
  std::string_view id() const override { return "gdn"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "gdn") return false;
    const bool prefill = def.input("cu_seqlens") != nullptr;
    const std::size_t rank = prefill ? 3 : 4;  // [total, H, D] or [B, T, H, D]
    const char* state_in = def.input("initial_state_indices") ? "initial_state" : "state";
    const char* state_out = def.input("initial_state_indices") ? "final_state" : "new_state";
    for (const char* n : {"q", "k", "v"}) {
      if (!shaped(def.input(n), rank)) {
        *why = fmt::format(
            "expects q, k, v of rank {} ({})", rank,
            prefill ? "[total_seq_len, heads, head_size]" : "[batch, seq_len, heads, head_size]");
        return false;
      }
    }
    if (!shaped(def.input(state_in), 4) || !shaped(def.output(state_out), 4) ||
        !def.output("output") || !def.input("A_log") || !def.input("a") || !def.input("dt_bias") ||
        !def.input("b")) {
      *why = fmt::format("expects {} [.., Hv, V, K], A_log, a, dt_bias, b -> output, {}", state_in,
                         state_out);
      return false;
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Definition& def = ctx.definition;
    const bool prefill = def.input("cu_seqlens") != nullptr;
    const bool mtp = def.input("initial_state_indices") != nullptr;
    const Tensor& q_t = args.tensor("q");
    const Tensor& k_t = args.tensor("k");
    const Tensor& v_t = args.tensor("v");
    const std::size_t hd = q_t.rank() - 2;  // the heads dimension
    const std::int64_t hq = q_t.dim(hd), hk = k_t.dim(hd), hv = v_t.dim(hd);
    const std::int64_t kd = q_t.dim(hd + 1), vd = v_t.dim(hd + 1);
    if (hq <= 0 || hk <= 0 || hv % hq != 0 || hv % hk != 0 || k_t.dim(hd + 1) != kd) {
      throw Error(def.name,
                  fmt::format("value heads {} must be a multiple of q heads {} and k heads {}", hv,
                              hq, hk));
    }
    const std::vector<float> q = as_floats(q_t), k = as_floats(k_t), v = as_floats(v_t);
    const std::vector<float> a_log = as_floats(args.tensor("A_log")),
                             dt_bias = as_floats(args.tensor("dt_bias"));
    const std::vector<float> a = as_floats(args.tensor("a")), b = as_floats(args.tensor("b"));
    double scale = args.scalars.count("scale") ? args.scalar_double("scale") : 0.0;
    if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(kd));
    const auto scale_f = static_cast<float>(scale);

    // Sequences: first flat token, length, state slot read, state slot written (-1: none).
    struct Seq {
      std::int64_t start, len, in, out;
    };
    std::vector<Seq> seqs;
    const Tensor* state_in = nullptr;
    Outputs result;
    Tensor out_t = make_output(ctx, "output");
    if (prefill) {
      const Tensor& cu = args.tensor("cu_seqlens");
      const std::int64_t total = q_t.dim(0);
      for (std::int64_t s = 0; s + 1 < cu.numel(); ++s) {
        const std::int64_t begin = int_at(cu, s), end = int_at(cu, s + 1);
        if (end > begin && (begin < 0 || end > total)) {
          throw Error(def.name,
                      fmt::format("cu_seqlens[{}..{}] = [{}, {}) is outside the {} tokens", s,
                                  s + 1, begin, end, total));
        }
        seqs.push_back({begin, std::max<std::int64_t>(0, end - begin), s, s});
      }
      if (args.has("state")) state_in = &args.tensor("state");
    } else {
      const std::int64_t batch = q_t.dim(0), t_len = q_t.dim(1);
      if (mtp) {
        state_in = &args.tensor("initial_state");
        const Tensor& idx = args.tensor("initial_state_indices");
        const std::int64_t pool = state_in->dim(0);
        for (std::int64_t s = 0; s < batch; ++s) {
          std::int64_t slot = int_at(idx, s);
          if (slot < 0) slot += pool;  // Python indexing, as the reference does
          if (slot < 0 || slot >= pool) {
            throw Error(def.name,
                        fmt::format("initial_state_indices[{}] = {} is outside the pool of {}", s,
                                    int_at(idx, s), pool));
          }
          seqs.push_back({s * t_len, t_len, slot, -1});
        }
      } else {
        if (args.has("state")) state_in = &args.tensor("state");
        for (std::int64_t s = 0; s < batch; ++s) seqs.push_back({s * t_len, t_len, s, s});
      }
    }

    const std::int64_t head_state = vd * kd;
    const float* sp = state_in ? state_in->data<float>() : nullptr;
    Tensor new_state = make_output(ctx, mtp ? "final_state" : "new_state");
    float* nsp = new_state.data<float>();
    if (mtp) std::copy(sp, sp + state_in->numel(), nsp);
    std::vector<float> o(static_cast<std::size_t>(out_t.numel()), 0.0f);
    const std::int64_t q_ratio = hv / hq, k_ratio = hv / hk;

    // One (sequence, value head) per work item: each owns its state and output rows.
    parallel_for(static_cast<std::int64_t>(seqs.size()) * hv, ctx.threads, 1,
                 [&](std::int64_t w0, std::int64_t w1) {
                   std::vector<float> st(static_cast<std::size_t>(head_state)),
                       old_v(static_cast<std::size_t>(vd)), new_v(static_cast<std::size_t>(vd));
                   for (std::int64_t w = w0; w < w1; ++w) {
                     const Seq& seq = seqs[static_cast<std::size_t>(w / hv)];
                     const std::int64_t h = w % hv;
                     if (seq.len == 0) continue;  // prefill: new_state stays zero
                     if (sp) {
                       const float* src = sp + (seq.in * hv + h) * head_state;
                       std::copy(src, src + head_state, st.begin());
                     } else {
                       std::fill(st.begin(), st.end(), 0.0f);
                     }
                     for (std::int64_t i = 0; i < seq.len; ++i) {
                       const std::int64_t tok = seq.start + i;
                       const float* qh = q.data() + (tok * hq + h / q_ratio) * kd;
                       const float* kh = k.data() + (tok * hk + h / k_ratio) * kd;
                       const float* vh = v.data() + (tok * hv + h) * vd;
                       const auto gi = static_cast<std::size_t>(tok * hv + h);
                       const float g =
                           std::exp(-std::exp(a_log[static_cast<std::size_t>(h)]) *
                                    softplus(a[gi] + dt_bias[static_cast<std::size_t>(h)]));
                       const float beta = 1.0f / (1.0f + std::exp(-b[gi]));
                       for (float& x : st) x *= g;
                       for (std::int64_t r = 0; r < vd; ++r) {
                         const float ov = dot(st.data() + r * kd, kh, kd);
                         old_v[static_cast<std::size_t>(r)] = ov;
                         new_v[static_cast<std::size_t>(r)] = beta * vh[r] + (1.0f - beta) * ov;
                       }
                       float* orow = o.data() + (tok * hv + h) * vd;
                       for (std::int64_t r = 0; r < vd; ++r) {
                         float* srow = st.data() + r * kd;
                         const float ov = old_v[static_cast<std::size_t>(r)],
                                     nv = new_v[static_cast<std::size_t>(r)];
                         for (std::int64_t c = 0; c < kd; ++c)
                           srow[c] = (srow[c] - kh[c] * ov) + kh[c] * nv;
                         orow[r] = scale_f * dot(srow, qh, kd);
                       }
                     }
                     if (seq.out >= 0)
                       std::copy(st.begin(), st.end(), nsp + (seq.out * hv + h) * head_state);
                   }
                 });
    store_floats(o, out_t);
    result.emplace("output", std::move(out_t));
    result.emplace(mtp ? "final_state" : "new_state", std::move(new_state));
    return result;
  }
};

}  // namespace

// Decode, mtp, prefill.
void add_gdn(KernelList& list) { list.push_back(std::make_unique<Gdn>()); }

}  // namespace fib::reference::detail
