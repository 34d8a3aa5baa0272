// Weight counts from the normalized architecture (what `fib models` lists). Small terms that
// configs do not pin down (rotary buffers) are left out; MTP draft layers are not counted, as
// model cards do not count them.
#include <fmt/format.h>

#include "fib/onboard/model_config.h"

namespace fib::onboard {

namespace {

struct Counts {
  std::int64_t total = 0;
  std::int64_t active = 0;
  void add(std::int64_t n) {
    total += n;
    active += n;
  }
};

std::int64_t attention_params(const ModelConfig& c) {
  const std::int64_t H = c.hidden_size;
  if (c.mla) {
    const auto& m = *c.mla;
    const std::int64_t h = c.num_heads;
    std::int64_t n = 0;
    if (m.q_lora_rank) {
      n += H * *m.q_lora_rank + *m.q_lora_rank +
           *m.q_lora_rank * h * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    } else {
      n += H * h * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    }
    n += H * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank;
    n += m.kv_lora_rank * h * (m.qk_nope_head_dim + m.v_head_dim);
    n += h * m.v_head_dim * H;
    if (c.indexer) {
      const auto& i = *c.indexer;
      n += m.q_lora_rank.value_or(H) * i.num_heads * i.head_dim + H * i.head_dim + 2 * i.head_dim +
           H * i.num_heads;
    }
    return n;
  }
  const std::int64_t q = c.num_heads * c.head_dim;
  const std::int64_t kv = c.num_kv_heads * c.head_dim;
  std::int64_t n = H * q * (c.attn_output_gate ? 2 : 1) + 2 * H * kv + q * H;
  if (c.attention_bias) n += q + 2 * kv;
  if (c.qk_norm == QkNorm::kPerHead) n += 2 * c.head_dim;
  if (c.qk_norm == QkNorm::kPerLayer) n += q + kv;
  if (c.attention_sinks) n += c.num_heads;
  return n;
}

std::int64_t gdn_params(const ModelConfig& c) {
  const auto& g = *c.gdn;
  const std::int64_t H = c.hidden_size;
  const std::int64_t qk = g.num_k_heads * g.key_head_dim;
  const std::int64_t v = g.num_v_heads * g.value_head_dim;
  return H * (2 * qk + 2 * v) + H * 2 * g.num_v_heads + (2 * qk + v) * g.conv_kernel +
         2 * g.num_v_heads + g.value_head_dim + v * H;
}

std::int64_t mamba_params(const ModelConfig& c) {
  const auto& m = *c.mamba;
  const std::int64_t H = c.hidden_size;
  const std::int64_t di = m.d_inner();
  const std::int64_t conv_dim = di + 2 * m.n_groups * m.state_size;
  return H * (2 * di + 2 * m.n_groups * m.state_size + m.num_heads) +
         conv_dim * (m.conv_kernel + 1) + 3 * m.num_heads + di + di * H;
}

std::int64_t mlp_params(const ModelConfig& c, std::int64_t inter) {
  return (c.gated_mlp ? 3 : 2) * c.hidden_size * inter;
}

}  // namespace

ParameterCount count_parameters(const ModelConfig& c) {
  Counts n;
  const std::int64_t H = c.hidden_size;
  n.add(c.vocab_size * H);
  if (!c.tie_word_embeddings) n.add(c.vocab_size * H);
  n.add(H);  // final norm
  for (const auto& l : c.layers) {
    const std::int64_t norms = (l.mixer != Mixer::kNone ? 1 : 0) + (l.ffn != Ffn::kNone ? 1 : 0);
    n.add(norms * H * (c.sandwich_norms ? 2 : 1));
    switch (l.mixer) {
      case Mixer::kAttention:
      case Mixer::kLightning:
        n.add(attention_params(c));
        break;
      case Mixer::kLinearAttention:
        if (c.gdn) n.add(gdn_params(c));
        break;
      case Mixer::kMamba:
        if (c.mamba) n.add(mamba_params(c));
        break;
      case Mixer::kNone:
        break;
    }
    if (l.ffn == Ffn::kDense) n.add(mlp_params(c, c.intermediate_size));
    if (l.ffn == Ffn::kMoe && c.moe) {
      const auto& m = *c.moe;
      std::int64_t expert = mlp_params(c, m.intermediate_size);
      if (m.expert_bias) expert += 2 * m.intermediate_size + H;
      n.total += m.num_experts * expert;
      n.active += m.top_k * expert;
      n.add(H * m.num_experts);                                   // router
      if (m.routing == Routing::kDeepSeek) n.add(m.num_experts);  // correction bias
      n.add(m.num_shared_experts * mlp_params(c, m.shared_intermediate_size));
      if (m.shared_expert_gate) n.add(H);
    }
  }
  return {n.total, n.active};
}

std::string format_count(std::int64_t n) {
  const double x = static_cast<double>(n);
  if (x >= 1e12) return fmt::format("{:.3g}T", x / 1e12);
  if (x >= 1e9) return fmt::format("{:.3g}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.3g}M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.3g}K", x / 1e3);
  return fmt::format("{}", n);
}

}  // namespace fib::onboard
