// moe: every MoE variant of the corpus, as its PyTorch reference computes it.
//
// One pipeline serves all five families; the interface says which stages apply:
//   routing   routing_logits + routing_bias + local_expert_offset + routed_scaling_factor:
//               DeepSeek-V3 no-aux (sigmoid + bias selects, unbiased sigmoid weights);
//             routing_logits + routing_bias (no scaling factor): Llama-4 (sigmoid top-k, the
//               weight scales the expert *input*; the bias is accepted and ignored);
//             routing_logits alone: Renormalize (top-k logits, softmax over the k);
//             topk_ids: pre-computed, packed (expert << 16 | bf16 weight bits); with top_k == 1
//               the weight scales the input (TRT-LLM applies routing scales on the input only
//               for Llama-4, the only top-1 routing), otherwise the output.
//   dequant   hidden_states_scale present: fp8 block scales on activations and both weights
//               (block sizes from the scale tensors' shapes);
//             output1_scales_scalar present: per-expert scales on up, gate and the output;
//             otherwise plain fp32 upcast (the "fp4" references take fp32 weights).
//   expert    g1 = A_e @ W13[e]^T; up = g1[:, :I], gate = g1[:, I:] (silu on the SECOND half);
//             o = (silu(gate) * up) @ W2[e]^T; output[t] += o * w, accumulated in fp32 in the
//             reference's (expert, slot) loop order and rounded once to bf16.
//   clamped   SWIGLU_ALPHA and SWIGLU_LIMIT set in the reference (gpt-oss, moe_bf16_swigluoai_*):
//             g1 += gemm1_bias[e]; up = clamp(up, -L, L), gate = min(gate, L);
//             c = (up + 1) * gate * sigmoid(alpha * gate); o = c @ W2[e]^T + gemm2_bias[e].
//             Expert biases are only accepted with this activation (the one family that has them).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <utility>

#include "fib/tensor/numeric.h"
#include "reference/kernels.h"
#include "reference/routing.h"

namespace fib::reference::detail {

namespace {

enum class Routing { kDeepSeek, kRenormalize, kLlama4, kPrecomputed };

// One (token, local expert, top-k slot) assignment with its routing weight, applied to the
// expert input (Llama-4) or to its output.
struct Pick {
  std::int64_t token;
  std::int64_t expert;
  std::int64_t slot;
  float w_in;
  float w_out;
};

// Eight independent partial sums: vectorizable without -ffast-math, and closer to the blocked
// sums BLAS uses than one serial chain.
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

// Row r of one expert's weight matrix [rows, cols] as fp32, times its block scale when there is
// one (the reference multiplies fp8 -> fp32 values by the fp32 scale, one rounding).
class WeightRows {
 public:
  WeightRows(const Tensor& w, const Tensor* block_scale) : w_(w), scale_(block_scale) {
    rows_ = w.dim(1);
    cols_ = w.dim(2);
    if (scale_) {
      scale_rows_ = scale_->dim(1);
      scale_cols_ = scale_->dim(2);
      row_block_ = rows_ / scale_rows_;
      col_block_ = cols_ / scale_cols_;
    }
    if (w.dtype() == DType::kFloat8E4M3FN || w.dtype() == DType::kFloat8E5M2) {
      for (int b = 0; b < 256; ++b) {
        const auto u = static_cast<std::uint8_t>(b);
        lut_[static_cast<std::size_t>(b)] = w.dtype() == DType::kFloat8E4M3FN
                                                ? numeric::fp8_e4m3fn_to_float(u)
                                                : numeric::fp8_e5m2_to_float(u);
      }
    }
  }

  std::int64_t cols() const { return cols_; }

  void row(std::int64_t e, std::int64_t r, float* out) const {
    const std::int64_t base = (e * rows_ + r) * cols_;
    switch (w_.dtype()) {
      case DType::kFloat32: {
        const float* p = w_.data<float>() + base;
        std::copy(p, p + cols_, out);
        break;
      }
      case DType::kFloat8E4M3FN:
      case DType::kFloat8E5M2: {
        const std::uint8_t* p = w_.data<std::uint8_t>() + base;
        for (std::int64_t c = 0; c < cols_; ++c) out[c] = lut_[p[c]];
        break;
      }
      case DType::kBFloat16: {
        const std::uint16_t* p = w_.data<std::uint16_t>() + base;
        for (std::int64_t c = 0; c < cols_; ++c) out[c] = numeric::bf16_to_float(p[c]);
        break;
      }
      case DType::kFloat16: {
        const std::uint16_t* p = w_.data<std::uint16_t>() + base;
        for (std::int64_t c = 0; c < cols_; ++c) out[c] = numeric::fp16_to_float(p[c]);
        break;
      }
      default:
        for (std::int64_t c = 0; c < cols_; ++c) out[c] = static_cast<float>(w_.get(base + c));
    }
    if (scale_) {
      const float* s = scale_->data<float>() + (e * scale_rows_ + r / row_block_) * scale_cols_;
      for (std::int64_t c = 0; c < cols_; ++c) out[c] *= s[c / col_block_];
    }
  }

 private:
  const Tensor& w_;
  const Tensor* scale_;
  std::int64_t rows_ = 0, cols_ = 0, scale_rows_ = 1, scale_cols_ = 1, row_block_ = 1,
               col_block_ = 1;
  std::array<float, 256> lut_{};
};

bool has_shape(const Definition& def, std::string_view name, std::size_t rank) {
  const TensorSpec* s = def.input(name);
  return s && s->shape && s->shape->size() == rank;
}

// The expert activation and biases: plain SwiGLU, or gpt-oss's clamped one with expert biases.
struct Activation {
  bool clamped = false;
  float alpha = 1.0f;
  float limit = 0.0f;
  std::vector<float> bias1;  // [E, 2I], empty when there is none
  std::vector<float> bias2;  // [E, H]
};

// SWIGLU_ALPHA and SWIGLU_LIMIT from the reference text, when both are there.
std::optional<std::pair<double, double>> clamped_swiglu(const Definition& def) {
  const auto c = reference_constants(def);
  auto a = c.find("SWIGLU_ALPHA");
  auto l = c.find("SWIGLU_LIMIT");
  if (a == c.end() || l == c.end()) return std::nullopt;
  return std::pair{a->second, l->second};
}

class Moe final : public Kernel {
 public:
  std::string_view id() const override { return "moe"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (def.op_type != "moe") return false;
    const TensorSpec* g1 = def.input("gemm1_weights");
    const TensorSpec* g2 = def.input("gemm2_weights");
    const TensorSpec* out = def.output("output");
    if (!has_shape(def, "hidden_states", 2) || !g1 || !g2 || !out || !g1->shape || !g2->shape ||
        g1->shape->size() != 3 || g2->shape->size() != 3 || (*g1->shape)[1] != "gemm1_out_size" ||
        (*g1->shape)[2] != "hidden_size" || (*g2->shape)[1] != "hidden_size" ||
        (*g2->shape)[2] != "intermediate_size" || !def.axis("intermediate_size")) {
      *why =
          "expects hidden_states [seq_len, hidden_size], gemm1_weights [E, gemm1_out_size, "
          "hidden_size], "
          "gemm2_weights [E, hidden_size, intermediate_size] -> output";
      return false;
    }
    if (!def.input("topk_ids") && !has_shape(def, "routing_logits", 2)) {
      *why = "expects routing_logits [seq_len, num_experts] or packed topk_ids [seq_len, top_k]";
      return false;
    }
    if (def.input("hidden_states_scale") &&
        (!has_shape(def, "gemm1_weights_scale", 3) || !has_shape(def, "gemm2_weights_scale", 3))) {
      *why =
          "block-scaled hidden_states need gemm1_weights_scale and gemm2_weights_scale [E, blocks, "
          "blocks]";
      return false;
    }
    if (def.input("output1_scales_scalar") &&
        (!def.input("output1_scales_gate_scalar") || !def.input("output2_scales_scalar"))) {
      *why =
          "per-tensor scales need output1_scales_scalar, output1_scales_gate_scalar and "
          "output2_scales_scalar";
      return false;
    }
    if (routing_of(def) == Routing::kDeepSeek && !def.input("routing_bias")) {
      *why = "DeepSeek routing needs routing_bias";
      return false;
    }
    if (!def.input("topk_ids") && !top_k_of(def, nullptr)) {
      *why =
          "the top-k is neither an axis 'top_k' nor a TOP_K (or top_k) constant of the reference";
      return false;
    }
    const auto consts = reference_constants(def);
    if ((consts.count("SWIGLU_ALPHA") > 0) != (consts.count("SWIGLU_LIMIT") > 0)) {
      *why = "a clamped SwiGLU needs both SWIGLU_ALPHA and SWIGLU_LIMIT in the reference";
      return false;
    }
    const bool bias1 = def.input("gemm1_bias") != nullptr,
               bias2 = def.input("gemm2_bias") != nullptr;
    if (bias1 || bias2) {
      if (!has_shape(def, "gemm1_bias", 2) || !has_shape(def, "gemm2_bias", 2)) {
        *why = "expert biases need gemm1_bias [E, gemm1_out_size] and gemm2_bias [E, hidden_size]";
        return false;
      }
      if (!clamped_swiglu(def)) {
        *why =
            "expert biases come with gpt-oss's clamped SwiGLU: the reference must set "
            "SWIGLU_ALPHA and SWIGLU_LIMIT";
        return false;
      }
    }
    return true;
  }

  Outputs run(const CallContext& ctx, const Arguments& args) const override {
    const Definition& def = ctx.definition;
    const Tensor& hs = args.tensor("hidden_states");
    const std::int64_t t_count = hs.dim(0), h = axis(ctx, "hidden_size"),
                       inter = axis(ctx, "intermediate_size");
    const Tensor& w1 = args.tensor("gemm1_weights");
    const Tensor& w2 = args.tensor("gemm2_weights");
    const std::int64_t local_experts = w1.dim(0);
    if (w1.dim(1) != 2 * inter) {
      throw Error(
          def.name,
          fmt::format(
              "gemm1_weights has {} rows per expert; SwiGLU needs 2 * intermediate_size = {}",
              w1.dim(1), 2 * inter));
    }

    const Tensor* w1_scale = nullptr;
    const Tensor* w2_scale = nullptr;
    const std::vector<float> a = activations(def, args, t_count, h);
    if (args.has("hidden_states_scale")) {
      w1_scale = &args.tensor("gemm1_weights_scale");
      w2_scale = &args.tensor("gemm2_weights_scale");
      check_blocks(def, "gemm1_weights_scale", *w1_scale, w1);
      check_blocks(def, "gemm2_weights_scale", *w2_scale, w2);
    }
    std::vector<float> up_scale(static_cast<std::size_t>(local_experts), 1.0f);
    std::vector<float> gate_scale = up_scale, out_scale = up_scale;
    if (args.has("output1_scales_scalar")) {
      up_scale = as_floats(args.tensor("output1_scales_scalar"));
      gate_scale = as_floats(args.tensor("output1_scales_gate_scalar"));
      out_scale = as_floats(args.tensor("output2_scales_scalar"));
    }

    Activation act;
    if (const auto c = clamped_swiglu(def)) {
      act.clamped = true;
      act.alpha = static_cast<float>(c->first);
      act.limit = static_cast<float>(c->second);
    }
    if (args.has("gemm1_bias")) {
      const Tensor& b1 = args.tensor("gemm1_bias");
      const Tensor& b2 = args.tensor("gemm2_bias");
      if (b1.rank() != 2 || b1.dim(0) != local_experts || b1.dim(1) != 2 * inter ||
          b2.rank() != 2 || b2.dim(0) != local_experts || b2.dim(1) != h) {
        throw Error(def.name, fmt::format("gemm1_bias {} and gemm2_bias {} must be [{}, {}] and "
                                          "[{}, {}]",
                                          shape_to_string(b1.shape()), shape_to_string(b2.shape()),
                                          local_experts, 2 * inter, local_experts, h));
      }
      act.bias1 = as_floats(b1);
      act.bias2 = as_floats(b2);
    }

    std::vector<Pick> picks = route(ctx, args, t_count, local_experts);
    // The references loop over experts, then top-k slots, and index_add_ each contribution.
    std::stable_sort(picks.begin(), picks.end(), [](const Pick& x, const Pick& y) {
      return x.expert != y.expert ? x.expert < y.expert : x.slot < y.slot;
    });

    std::vector<float> out(static_cast<std::size_t>(t_count * h), 0.0f);
    const WeightRows rows1(w1, w1_scale), rows2(w2, w2_scale);
    std::size_t begin = 0;
    while (begin < picks.size()) {
      std::size_t end = begin;
      while (end < picks.size() && picks[end].expert == picks[begin].expert) ++end;
      run_expert(ctx, a, h, inter, std::span<const Pick>(picks.data() + begin, end - begin), rows1,
                 rows2, up_scale, gate_scale, out_scale, act, out);
      begin = end;
    }
    Outputs result;
    Tensor t = make_output(ctx, "output");
    store_floats(out, t);
    result.emplace("output", std::move(t));
    return result;
  }

 private:
  static Routing routing_of(const Definition& def) {
    if (def.input("topk_ids")) return Routing::kPrecomputed;
    if (def.input("routed_scaling_factor") || def.input("local_expert_offset"))
      return Routing::kDeepSeek;
    if (def.input("routing_bias")) return Routing::kLlama4;
    return Routing::kRenormalize;
  }

  static std::optional<std::int64_t> top_k_of(const Definition& def, const CallContext* ctx) {
    if (ctx) {
      if (auto v = axis_value(ctx->axes, "top_k")) return *v;
    } else if (const Axis* ax = def.axis("top_k"); ax && ax->value) {
      return *ax->value;
    }
    // The corpus spells the constant TOP_K; fib's generated references spell it top_k.
    const auto c = reference_constants(def);
    for (const char* name : {"TOP_K", "top_k"}) {
      if (auto it = c.find(name); it != c.end()) return static_cast<std::int64_t>(it->second);
    }
    return std::nullopt;
  }

  static void check_blocks(const Definition& def, std::string_view name, const Tensor& scale,
                           const Tensor& w) {
    if (scale.rank() != 3 || scale.dim(0) != w.dim(0) || scale.dim(1) <= 0 || scale.dim(2) <= 0 ||
        w.dim(1) % scale.dim(1) != 0 || w.dim(2) % scale.dim(2) != 0) {
      throw Error(def.name,
                  fmt::format("{} {} does not tile the weights {} into whole blocks", name,
                              shape_to_string(scale.shape()), shape_to_string(w.shape())));
    }
  }

  // A [T, H] in fp32: fp8 * per-(token, block) scale (scale stored transposed [H/B, T]), or a
  // plain upcast.
  static std::vector<float> activations(const Definition& def, const Arguments& args,
                                        std::int64_t t_count, std::int64_t h) {
    std::vector<float> a = as_floats(args.tensor("hidden_states"));
    if (!args.has("hidden_states_scale")) return a;
    const Tensor& s = args.tensor("hidden_states_scale");
    if (s.rank() != 2 || s.dim(1) != t_count || s.dim(0) <= 0 || h % s.dim(0) != 0) {
      throw Error(
          def.name,
          fmt::format("hidden_states_scale {} does not tile hidden_states [{}, {}] into blocks",
                      shape_to_string(s.shape()), t_count, h));
    }
    const std::int64_t block = h / s.dim(0);
    const float* sp = s.data<float>();
    for (std::int64_t t = 0; t < t_count; ++t) {
      for (std::int64_t i = 0; i < h; ++i)
        a[static_cast<std::size_t>(t * h + i)] *= sp[(i / block) * t_count + t];
    }
    return a;
  }

  static std::vector<Pick> route(const CallContext& ctx, const Arguments& args,
                                 std::int64_t t_count, std::int64_t local_experts) {
    const Definition& def = ctx.definition;
    std::vector<Pick> picks;
    const Routing routing = routing_of(def);
    if (routing == Routing::kPrecomputed) {
      const Tensor& ids = args.tensor("topk_ids");
      const std::int64_t k = ids.dim(1);
      const bool on_input = k == 1;
      for (std::int64_t t = 0; t < t_count; ++t) {
        for (std::int64_t j = 0; j < k; ++j) {
          const auto packed = static_cast<std::int32_t>(int_at(ids, t * k + j));
          // (ids >> 16).to(int16) and (ids & 0xFFFF).to(int16).view(bfloat16).
          const auto expert = static_cast<std::int16_t>(packed >> 16);
          const float w = numeric::bf16_to_float(static_cast<std::uint16_t>(packed & 0xFFFF));
          // The reference loops e over [0, E): other ids contribute nothing.
          if (expert < 0 || expert >= local_experts) continue;
          picks.push_back({t, expert, j, on_input ? w : 1.0f, on_input ? 1.0f : w});
        }
      }
      return picks;
    }

    const std::int64_t k = *top_k_of(def, &ctx);
    const std::vector<float> logits = as_floats(args.tensor("routing_logits"));
    const std::int64_t e_count = args.tensor("routing_logits").dim(1);
    if (k < 1 || k > e_count)
      throw Error(def.name, fmt::format("top_k {} is outside [1, {}]", k, e_count));
    if (routing == Routing::kDeepSeek) {
      route_deepseek(ctx, args, logits, t_count, e_count, k, local_experts, picks);
      return picks;
    }
    for (std::int64_t t = 0; t < t_count; ++t) {
      const float* row = logits.data() + t * e_count;
      // Llama-4 scales the expert input by the unnormalized sigmoid score.
      const bool llama4 = routing == Routing::kLlama4;
      const std::vector<RoutedExpert> r = llama4 ? route_sigmoid_topk(row, e_count, k, false)
                                                 : route_topk_renormalized(row, e_count, k);
      for (std::int64_t j = 0; j < k; ++j) {
        const RoutedExpert& p = r[static_cast<std::size_t>(j)];
        if (p.expert >= local_experts) continue;
        picks.push_back({t, p.expert, j, llama4 ? p.weight : 1.0f, llama4 ? 1.0f : p.weight});
      }
    }
    return picks;
  }

  static void route_deepseek(const CallContext& ctx, const Arguments& args,
                             const std::vector<float>& logits, std::int64_t t_count,
                             std::int64_t e_count, std::int64_t k, std::int64_t local_experts,
                             std::vector<Pick>& picks) {
    const Definition& def = ctx.definition;
    const auto consts = reference_constants(def);
    const auto constant = [&consts](const char* name) {
      auto it = consts.find(name);
      return it == consts.end() ? std::int64_t{1} : static_cast<std::int64_t>(it->second);
    };
    const DeepSeekGroups g{constant("N_GROUP"), constant("TOPK_GROUP")};
    if (!deepseek_groups_fit(g, e_count, k)) {
      throw Error(
          def.name,
          fmt::format("cannot split {} experts into {} groups and keep top {} groups for top-{}",
                      e_count, g.n_group, g.topk_group, k));
    }
    const std::vector<float> bias = as_floats(args.tensor("routing_bias"));
    const float rsf = static_cast<float>(args.scalar_double("routed_scaling_factor"));
    const std::int64_t offset = args.scalar_int("local_expert_offset");
    // Some references add 1e-20 to the weight sum, others clamp it from below: the same for
    // any sum of sigmoids above ~1e-13, but kept as written.
    const bool clamp = def.reference.find(".clamp(min=") != std::string::npos;
    for (std::int64_t t = 0; t < t_count; ++t) {
      for (const RoutedExpert& p : detail::route_deepseek(logits.data() + t * e_count, bias.data(),
                                                          e_count, k, g, rsf, clamp)) {
        const std::int64_t le = p.expert - offset;
        if (le < 0 || le >= local_experts) continue;  // another EP rank's expert
        picks.push_back({t, le, 0, 1.0f, p.weight});
      }
    }
  }

  // One expert: GEMM1 split over its 2I weight rows, then GEMM2 split over its H weight rows;
  // each thread owns whole output columns, so the fp32 accumulation order is the reference's
  // whatever the thread count.
  static void run_expert(const CallContext& ctx, const std::vector<float>& a, std::int64_t h,
                         std::int64_t inter, std::span<const Pick> picks, const WeightRows& rows1,
                         const WeightRows& rows2, const std::vector<float>& up_scale,
                         const std::vector<float>& gate_scale, const std::vector<float>& out_scale,
                         const Activation& act, std::vector<float>& out) {
    const std::int64_t n = static_cast<std::int64_t>(picks.size());
    const std::int64_t e = picks[0].expert;
    const std::int64_t g1_cols = 2 * inter;
    std::vector<float> ae(static_cast<std::size_t>(n * h));
    for (std::int64_t j = 0; j < n; ++j) {
      const Pick& p = picks[static_cast<std::size_t>(j)];
      const float* src = a.data() + p.token * h;
      float* dst = ae.data() + j * h;
      for (std::int64_t i = 0; i < h; ++i) dst[i] = src[i] * p.w_in;  // * 1.0f is exact
    }
    std::vector<float> g1(static_cast<std::size_t>(n * g1_cols));
    const std::int64_t grain1 = std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(1, n * h));
    parallel_for(g1_cols, ctx.threads, grain1, [&](std::int64_t r0, std::int64_t r1) {
      std::vector<float> w(static_cast<std::size_t>(h));
      for (std::int64_t r = r0; r < r1; ++r) {
        rows1.row(e, r, w.data());
        const float b =
            act.bias1.empty() ? 0.0f : act.bias1[static_cast<std::size_t>(e * g1_cols + r)];
        for (std::int64_t j = 0; j < n; ++j) {
          float v = dot(ae.data() + j * h, w.data(), h);
          if (!act.bias1.empty()) v += b;
          g1[static_cast<std::size_t>(j * g1_cols + r)] = v;
        }
      }
    });
    const float su = up_scale[static_cast<std::size_t>(e)],
                sg = gate_scale[static_cast<std::size_t>(e)];
    const float so = out_scale[static_cast<std::size_t>(e)];
    std::vector<float> c(static_cast<std::size_t>(n * inter));
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t i = 0; i < inter; ++i) {
        float up = g1[static_cast<std::size_t>(j * g1_cols + i)] * su;
        float gate = g1[static_cast<std::size_t>(j * g1_cols + inter + i)] * sg;
        if (act.clamped) {
          // clamp() as torch does it: NaN stays NaN.
          const float lim = act.limit;
          up = up < -lim ? -lim : (up > lim ? lim : up);
          gate = gate > lim ? lim : gate;
          const float glu = gate * (1.0f / (1.0f + std::exp(-(act.alpha * gate))));
          c[static_cast<std::size_t>(j * inter + i)] = (up + 1.0f) * glu;
        } else {
          c[static_cast<std::size_t>(j * inter + i)] = gate / (1.0f + std::exp(-gate)) * up;
        }
      }
    }
    const std::int64_t grain2 =
        std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(1, n * inter));
    parallel_for(h, ctx.threads, grain2, [&](std::int64_t r0, std::int64_t r1) {
      std::vector<float> w(static_cast<std::size_t>(inter));
      for (std::int64_t r = r0; r < r1; ++r) {
        rows2.row(e, r, w.data());
        for (std::int64_t j = 0; j < n; ++j) {
          const Pick& p = picks[static_cast<std::size_t>(j)];
          float o = dot(c.data() + j * inter, w.data(), inter) * so;
          if (!act.bias2.empty()) o += act.bias2[static_cast<std::size_t>(e * h + r)];
          out[static_cast<std::size_t>(p.token * h + r)] += o * p.w_out;
        }
      }
    });
  }
};

}  // namespace

// Every moe variant of the corpus.
void add_moe(KernelList& list) { list.push_back(std::make_unique<Moe>()); }

}  // namespace fib::reference::detail
