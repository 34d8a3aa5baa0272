// Expands a layer plan at one serving point into the module tree and the kernels each module
// runs, applying the parallelism rules. Every part of a layer without an op family is recorded
// as unsupported so the report can list it.
#include <fmt/format.h>

#include <algorithm>

#include "fib/onboard/parallelism.h"
#include "fib/onboard/plan.h"

namespace fib::onboard {

namespace {

class Expander {
 public:
  Expander(const ModelPlan& plan, const ServingPoint& point, const ServingOptions& options)
      : plan_(plan),
        c_(plan.config),
        point_(point),
        opt_(options),
        quant_(options.quantization.value_or(plan.config.quantization)) {}

  Expansion run();

 private:
  // Module keys carry the layer type when a model has several, so keys stay unique.
  // The draft (MTP) layers' modules carry "mtp." so they never merge with the main layers'.
  std::string key(const std::string& base) const {
    return prefix_ + (multi_ ? fmt::format("{}.{}", base, type_->id) : base);
  }
  ModuleNode& add(std::string k, std::string parent, bool block, std::int64_t count) {
    out_.modules.push_back({std::move(k), std::move(parent), block, count, {}});
    return out_.modules.back();
  }
  // Index-based handle: push_back may move nodes, so callers keep the key, not a reference.
  std::size_t add_layer(const std::string& base, const std::string& parent, bool block = false) {
    add(key(base), parent, block, count_);
    return out_.modules.size() - 1;
  }
  void use(std::size_t node, KernelSpec spec, std::optional<Stage> stage = std::nullopt) {
    if (!opt_.wants_op_type(op_type_of(spec))) return;
    if (stage && !opt_.has_stage(*stage)) return;
    out_.modules[node].kernels.push_back({std::move(spec), stage});
  }
  void unsupported(std::size_t node, std::string component, std::string reason,
                   Severity sev = Severity::kWarning) {
    out_.unsupported.push_back({type_ ? type_->id : "", out_.modules[node].key,
                                std::move(component), std::move(reason), sev});
  }
  bool check(const Split& s) {
    if (s.ok()) return true;
    out_.diagnostics.error("", "", fmt::format("tp={} ep={}: {}", point_.tp, point_.ep, s.error));
    return false;
  }
  GemmKernel gemm(std::int64_t n, std::int64_t k, Parallel p, std::string role,
                  std::optional<std::int64_t> rank_n = std::nullopt,
                  std::optional<std::int64_t> rank_k = std::nullopt) {
    const auto s = gemm_shape(n, k, p, point_.tp, opt_.gemm_shapes, rank_n, rank_k);
    const bool per_rank = opt_.gemm_shapes == GemmShapes::kPerRank;
    return GemmKernel{s.n, s.k, std::move(role), per_rank ? point_.tp : 0};
  }
  // A linear layer in the serving quantization: a bf16 GEMM, or the activation quantization and
  // the quantized GEMM it feeds. The router, lm_head and small gates stay bf16 GEMMs (gemm()).
  void linear(std::size_t node, std::int64_t n, std::int64_t k, Parallel p, std::string role,
              std::optional<std::int64_t> rank_n = std::nullopt,
              std::optional<std::int64_t> rank_k = std::nullopt);
  // Once per expansion: a quantized format whose activation quantization has no op type.
  void unquantized_activations(std::size_t node, std::string_view kernel);
  RmsNormKernel norm(std::int64_t h, bool fused, std::string role) const {
    return RmsNormKernel{h, c_.norm_eps, fused, c_.gemma_norm, std::move(role)};
  }
  // A gated MLP's act(gate) * up, at the width its gate/up GEMM gives (per rank where the GEMMs
  // are); relu2 MLPs have no gate.
  void act_and_mul(std::size_t node, std::int64_t intermediate, std::string role) {
    if (!c_.gated_mlp) {
      unsupported(node, "relu2", "an ungated activation has no op family", Severity::kInfo);
      return;
    }
    const auto s = gemm_shape(intermediate, 0, Parallel::kColumn, point_.tp, opt_.gemm_shapes);
    const bool per_rank = opt_.gemm_shapes == GemmShapes::kPerRank;
    const ActivationKind kind =
        c_.activation == Activation::kGeluTanh ? ActivationKind::kGeluTanh : ActivationKind::kSilu;
    use(node, ActivationKernel{kind, s.n, std::move(role), per_rank ? point_.tp : 0});
  }

  void layer_norm_in(const std::string& parent, const std::string& base);
  void attention(const std::string& parent);
  void gqa(const std::string& parent);
  void mla(const std::string& parent);
  void gdn(const std::string& parent);
  void mamba(const std::string& parent);
  void dense_mlp(const std::string& parent);
  void moe(const std::string& parent);
  void moe_routing(std::size_t gate);
  void decoder_layer(const LayerType& t, const std::string& parent);
  void model_head(const std::string& parent, const std::string& prefix);
  void mtp_layers();

  const ModelPlan& plan_;
  const ModelConfig& c_;
  ServingPoint point_;
  const ServingOptions& opt_;
  Quantization quant_;
  bool noted_activations_ = false;
  Expansion out_;
  const LayerType* type_ = nullptr;
  bool multi_ = false;
  std::int64_t count_ = 1;
  bool first_layer_ = false;
  std::string prefix_;
};

void Expander::linear(std::size_t node, std::int64_t n, std::int64_t k, Parallel p,
                      std::string role, std::optional<std::int64_t> rank_n,
                      std::optional<std::int64_t> rank_k) {
  GemmKernel g = gemm(n, k, p, std::move(role), rank_n, rank_k);
  switch (quant_) {
    case Quantization::kNone:
      use(node, std::move(g));
      return;
    case Quantization::kFp8Block:
      if (g.k % 128 != 0) {
        unsupported(node, "FP8 block-scale GEMM",
                    fmt::format("K={} is not a multiple of the 128-wide scale blocks; planned as "
                                "a bf16 GEMM",
                                g.k),
                    Severity::kInfo);
        use(node, std::move(g));
        return;
      }
      use(node, QuantizationKernel{QuantKind::kPerTokenGroupFp8, g.k, 128, g.role});
      use(node, GemmFp8Kernel{Fp8Scaling::kBlock, g.n, g.k, std::move(g.role), g.tp});
      return;
    case Quantization::kFp8PerTensor:
      use(node, QuantizationKernel{QuantKind::kPerTensorFp8, g.k, 0, g.role});
      use(node, GemmFp8Kernel{Fp8Scaling::kPerTensor, g.n, g.k, std::move(g.role), g.tp});
      return;
    case Quantization::kInt8:
      unquantized_activations(node, "per-token INT8 activation quantization");
      use(node, GemmInt8Kernel{g.n, g.k, std::move(g.role), g.tp});
      return;
  }
}

void Expander::unquantized_activations(std::size_t node, std::string_view kernel) {
  if (noted_activations_) return;
  noted_activations_ = true;
  unsupported(node, std::string(kernel),
              fmt::format("the {} GEMMs' input quantization has no op type; each quantized "
                          "GEMM's definition takes the quantized activations",
                          quantization_name(quant_)),
              Severity::kInfo);
}

void Expander::layer_norm_in(const std::string& parent, const std::string& base) {
  const auto n = add_layer(base, parent);
  // Layer 0 has no residual yet; every later layer fuses the residual add into its first norm.
  // Each draft (MTP) layer starts without one.
  if (first_layer_) use(n, norm(c_.hidden_size, false, "input_layernorm"));
  const bool draft = !prefix_.empty();
  if (!draft) use(n, norm(c_.hidden_size, true, "input_layernorm"));
}

void Expander::attention(const std::string& parent) {
  if (c_.mla) {
    mla(parent);
  } else {
    gqa(parent);
  }
}

void Expander::gqa(const std::string& parent) {
  const std::string attn_key = key("self_attn");
  add(attn_key, parent, true, count_);
  const std::int64_t H = c_.hidden_size, d = c_.head_dim, h = c_.num_heads, kv = c_.num_kv_heads;
  const Split hs = split_heads(h, point_.tp, "num_attention_heads");
  const Split kvs = split_kv_heads(kv, point_.tp, "num_key_value_heads");
  const bool ok = check(hs) && check(kvs);
  const std::int64_t q_mult =
      c_.attn_output_gate ? 2 : 1;  // Qwen3-Next: q_proj also yields the gate
  if (c_.fused_qkv) {
    const auto n = add_layer("qkv_proj", attn_key);
    const std::optional<std::int64_t> rank_n =
        ok ? std::optional<std::int64_t>((hs.per_rank * q_mult + 2 * kvs.per_rank) * d)
           : std::nullopt;
    linear(n, (h * q_mult + 2 * kv) * d, H, Parallel::kColumn, "attn.qkv_proj", rank_n);
    if (c_.attention_bias)
      unsupported(n, "qkv bias add", "added in the GEMM epilogue; not a separate kernel",
                  Severity::kInfo);
  } else {
    const auto q = add_layer("q_proj", attn_key);
    linear(q, h * q_mult * d, H, Parallel::kColumn, "attn.q_proj");
    const auto k = add_layer("k_proj", attn_key);
    const std::optional<std::int64_t> rank_kv =
        ok ? std::optional<std::int64_t>(kvs.per_rank * d) : std::nullopt;
    linear(k, kv * d, H, Parallel::kColumn, "attn.k_proj", rank_kv);
    const auto v = add_layer("v_proj", attn_key);
    linear(v, kv * d, H, Parallel::kColumn, "attn.v_proj", rank_kv);
  }
  switch (c_.qk_norm) {
    case QkNorm::kPerHead: {
      const auto qn = add_layer("q_norm", attn_key);
      use(qn, norm(d, false, "q_norm, per head"));
      const auto kn = add_layer("k_norm", attn_key);
      use(kn, norm(d, false, "k_norm, per head"));
      break;
    }
    case QkNorm::kPerLayer: {
      const auto qn = add_layer("q_norm", attn_key);
      use(qn, norm(h * d, false, "q_norm over all query heads"));
      const auto kn = add_layer("k_norm", attn_key);
      use(kn, norm(kv * d, false, "k_norm over all key heads"));
      if (point_.tp > 1) {
        unsupported(qn, "distributed q/k RMSNorm",
                    "under TP the norm over all heads reduces its variance across ranks; the "
                    "definition is the "
                    "unsharded norm",
                    Severity::kInfo);
      }
      break;
    }
    case QkNorm::kL2:
      if (type_->spec.rope) {
        const auto qn = add_layer("qk_norm", attn_key);
        unsupported(qn, "q/k L2 norm", "weightless L2 normalization has no op family");
      }
      break;
    case QkNorm::kNone:
      break;
  }
  if (c_.rope && type_->spec.rope) {
    const auto r = add_layer("rotary_emb", attn_key);
    use(r, RopeKernel{d, c_.rope->rotary_dim, c_.rope->style});
  }
  const auto attn = add_layer("attn", attn_key);
  if (ok) {
    const AttentionHeads heads{hs.per_rank, kvs.per_rank, d, h, kv, point_.tp, c_.attention_sinks};
    for (auto ps : opt_.page_sizes)
      use(attn, GqaPagedKernel{Stage::kDecode, heads, ps}, Stage::kDecode);
    for (auto ps : opt_.page_sizes)
      use(attn, GqaPagedKernel{Stage::kPrefill, heads, ps}, Stage::kPrefill);
    use(attn, GqaRaggedKernel{heads}, Stage::kPrefill);
    // Each step writes its new keys and values into the layer's paged cache first.
    for (auto ps : opt_.page_sizes)
      use(attn, PageAppendKernel{false, kvs.per_rank, d, 0, 0, ps, point_.tp});
  }
  if (type_->spec.sliding_window && c_.sliding_window) {
    unsupported(
        attn, "sliding window",
        fmt::format(
            "window {} is a kernel argument (window_left); the definitions are the plain causal "
            "kernels",
            *c_.sliding_window),
        Severity::kInfo);
  }
  if (c_.attention_chunk_size && type_->spec.rope) {
    unsupported(
        attn, "chunked attention",
        fmt::format(
            "local attention within {}-token chunks is expressed by the KV ranges passed in",
            *c_.attention_chunk_size),
        Severity::kInfo);
  }
  if (c_.attn_output_gate) {
    unsupported(attn, "attention output gate", "sigmoid(gate) * output is an elementwise kernel",
                Severity::kInfo);
  }
  const auto o = add_layer("o_proj", attn_key);
  linear(o, H, h * d, Parallel::kRow, "attn.o_proj", std::nullopt,
         ok ? std::optional<std::int64_t>(hs.per_rank * d) : std::nullopt);
}

void Expander::mla(const std::string& parent) {
  const auto& m = *c_.mla;
  const std::string attn_key = key("self_attn");
  add(attn_key, parent, true, count_);
  const std::int64_t H = c_.hidden_size, h = c_.num_heads;
  const std::int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
  const Split hs = split_heads(h, point_.tp, "num_attention_heads");
  const bool ok = check(hs);
  if (m.q_lora_rank) {
    const auto a = add_layer("fused_qkv_a_proj_with_mqa", attn_key);
    linear(a, *m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim, H, Parallel::kReplicated,
           "attn.fused_qkv_a_proj_with_mqa");
    const auto qn = add_layer("q_a_layernorm", attn_key);
    use(qn, norm(*m.q_lora_rank, false, "q_a_layernorm, MLA query LoRA"));
    const auto qb = add_layer("q_b_proj", attn_key);
    linear(qb, h * qk, *m.q_lora_rank, Parallel::kColumn, "attn.q_b_proj");
  } else {
    const auto q = add_layer("q_proj", attn_key);
    linear(q, h * qk, H, Parallel::kColumn, "attn.q_proj");
    const auto a = add_layer("kv_a_proj_with_mqa", attn_key);
    linear(a, m.kv_lora_rank + m.qk_rope_head_dim, H, Parallel::kReplicated,
           "attn.kv_a_proj_with_mqa");
  }
  const auto kvn = add_layer("kv_a_layernorm", attn_key);
  use(kvn, norm(m.kv_lora_rank, false, "kv_a_layernorm, MLA key-value LoRA"));
  const auto kvb = add_layer("kv_b_proj", attn_key);
  linear(kvb, h * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank, Parallel::kColumn,
         "attn.kv_b_proj");
  // Weight absorption (decode): each head's q_nope times its W_UK into the latent space, and
  // its latent attention output times its W_UV back to v_head_dim.
  if (ok) {
    const auto absorb = add_layer("w_kc", attn_key);
    use(absorb, BmmKernel{hs.per_rank, m.kv_lora_rank, m.qk_nope_head_dim,
                          "attn.w_kc, q_nope @ W_UK", point_.tp});
    const auto vc = add_layer("w_vc", attn_key);
    use(vc, BmmKernel{hs.per_rank, m.v_head_dim, m.kv_lora_rank, "attn.w_vc, latent output @ W_UV",
                      point_.tp});
  }
  if (c_.rope) {
    const auto r = add_layer("rotary_emb", attn_key);
    use(r, RopeKernel{m.qk_rope_head_dim, m.qk_rope_head_dim, c_.rope->style});
  }
  if (c_.indexer) {
    const auto& ix = *c_.indexer;
    const std::string idx_key = key("indexer");
    add(idx_key, attn_key, true, count_);
    const auto wq = add_layer("wq_b", idx_key);
    linear(wq, ix.num_heads * ix.head_dim, m.q_lora_rank.value_or(H), Parallel::kReplicated,
           "indexer.wq_b");
    const auto wk = add_layer("wk", idx_key);
    linear(wk, ix.head_dim, H, Parallel::kReplicated, "indexer.wk");
    const auto kn = add_layer("k_norm", idx_key);
    unsupported(kn, "indexer key LayerNorm", "LayerNorm (with bias) has no op family",
                Severity::kInfo);
    // The query (after wq_b) and the key (after k_norm) are rotated before the FP8 logits.
    const auto rot = add_layer("rotate_activation", idx_key);
    use(rot, HadamardKernel{ix.head_dim});
    const auto wp = add_layer("weights_proj", idx_key);
    use(wp, gemm(ix.num_heads, H, Parallel::kReplicated, "indexer.weights_proj"));
    const auto topk = add_layer("topk_indexer", idx_key);
    // deep_gemm's paged FP8 logits kernel works on 64-token pages only.
    if (std::find(opt_.page_sizes.begin(), opt_.page_sizes.end(), 64) != opt_.page_sizes.end()) {
      use(topk, DsaIndexerKernel{ix.num_heads, ix.head_dim, ix.topk, 64});
    } else {
      unsupported(topk, "top-k indexer",
                  "the FP8 indexer cache needs page size 64, which was not requested",
                  Severity::kInfo);
    }
    const auto attn = add_layer("attn_mqa", attn_key);
    if (ok) {
      // Each step writes its compressed kv and k_pe rows into the layer's paged caches (one
      // latent per token, the same on every rank).
      use(attn, PageAppendKernel{true, 0, 0, m.kv_lora_rank, m.qk_rope_head_dim, 1, 1});
      for (auto ps : opt_.page_sizes) {
        use(attn, DsaAttentionKernel{hs.per_rank, h, point_.tp, m.kv_lora_rank, m.qk_rope_head_dim,
                                     m.qk_nope_head_dim, ix.topk, ps});
      }
    }
  } else {
    const auto attn = add_layer("attn_mqa", attn_key);
    if (ok) {
      // Each step writes its compressed kv and k_pe rows into the layer's paged caches (one
      // latent per token, the same on every rank).
      use(attn, PageAppendKernel{true, 0, 0, m.kv_lora_rank, m.qk_rope_head_dim, 1, 1});
      for (auto ps : opt_.page_sizes) {
        use(attn,
            MlaPagedKernel{Stage::kDecode, hs.per_rank, h, point_.tp, m.kv_lora_rank,
                           m.qk_rope_head_dim, m.qk_nope_head_dim, ps},
            Stage::kDecode);
      }
      // TRT-LLM's MLA decode takes the query whole: the absorbed q_nope and q_pe side by side.
      use(attn, ConcatMlaQKernel{hs.per_rank, m.kv_lora_rank, m.qk_rope_head_dim, point_.tp},
          Stage::kDecode);
      for (auto ps : opt_.page_sizes) {
        use(attn,
            MlaPagedKernel{Stage::kPrefill, hs.per_rank, h, point_.tp, m.kv_lora_rank,
                           m.qk_rope_head_dim, m.qk_nope_head_dim, ps},
            Stage::kPrefill);
      }
    }
    const auto mha = add_layer("attn_mha", attn_key);
    if (ok) {
      use(mha,
          MlaRaggedKernel{hs.per_rank, h, point_.tp, m.qk_nope_head_dim, m.qk_rope_head_dim,
                          m.v_head_dim},
          Stage::kPrefill);
      // A prefill over a cached prefix attends to the prefix in chunks and merges each chunk's
      // state into the new tokens' (SGLang's chunked-prefix MHA, merge_state_v2).
      use(mha, MergeStateKernel{hs.per_rank, m.v_head_dim, point_.tp}, Stage::kPrefill);
    }
  }
  const auto o = add_layer("o_proj", attn_key);
  linear(o, H, h * m.v_head_dim, Parallel::kRow, "attn.o_proj");
}

void Expander::gdn(const std::string& parent) {
  const auto& g = *c_.gdn;
  const std::string attn_key = key("linear_attn");
  add(attn_key, parent, true, count_);
  const std::int64_t H = c_.hidden_size;
  const Split qks = split_heads(g.num_k_heads, point_.tp, "linear_num_key_heads");
  const Split vs = split_heads(g.num_v_heads, point_.tp, "linear_num_value_heads");
  const bool ok = check(qks) && check(vs);
  const std::int64_t qkvz =
      2 * g.num_k_heads * g.key_head_dim + 2 * g.num_v_heads * g.value_head_dim;
  const auto in = add_layer("in_proj_qkvz", attn_key);
  linear(in, qkvz, H, Parallel::kColumn, "linear_attn.in_proj_qkvz");
  const auto ba = add_layer("in_proj_ba", attn_key);
  linear(ba, 2 * g.num_v_heads, H, Parallel::kColumn, "linear_attn.in_proj_ba");
  const auto conv = add_layer("conv1d", attn_key);
  unsupported(conv, "causal_conv1d",
              fmt::format("depthwise causal conv1d (kernel {}) over q, k, v has no op family",
                          g.conv_kernel));
  const auto attn = add_layer("attn", attn_key);
  if (g.key_head_dim != g.value_head_dim) {
    unsupported(attn, "gated delta rule", "the gdn definitions need equal key and value head dims");
  } else if (ok) {
    for (Stage s : {Stage::kDecode, Stage::kMtp, Stage::kPrefill}) {
      use(attn,
          GdnKernel{s, qks.per_rank, vs.per_rank, g.key_head_dim, g.num_k_heads, g.num_v_heads,
                    point_.tp},
          s);
    }
  }
  const auto n = add_layer("norm", attn_key);
  unsupported(n, "gated RMSNorm", "RMSNorm(x) * silu(z) has no op family");
  const auto o = add_layer("out_proj", attn_key);
  linear(o, H, g.num_v_heads * g.value_head_dim, Parallel::kRow, "linear_attn.out_proj");
}

void Expander::mamba(const std::string& parent) {
  const auto& m = *c_.mamba;
  const std::string mixer_key = key("mixer");
  add(mixer_key, parent, true, count_);
  const std::int64_t H = c_.hidden_size;
  const Split hs = split_heads(m.num_heads, point_.tp, "mamba_num_heads");
  const Split gs = split_heads(m.n_groups, point_.tp, "n_groups");
  const bool ok = check(hs) && check(gs);
  const auto in = add_layer("in_proj", mixer_key);
  linear(in, 2 * m.d_inner() + 2 * m.n_groups * m.state_size + m.num_heads, H, Parallel::kColumn,
         "mixer.in_proj");
  const auto conv = add_layer("conv1d", mixer_key);
  unsupported(conv, "causal_conv1d",
              fmt::format("depthwise causal conv1d (kernel {}) over x, B, C has no op family",
                          m.conv_kernel));
  const auto ssm = add_layer("ssm", mixer_key);
  if (ok)
    use(ssm,
        MambaKernel{hs.per_rank, m.head_dim, m.state_size, gs.per_rank, m.num_heads, point_.tp},
        Stage::kDecode);
  if (opt_.has_stage(Stage::kPrefill)) {
    unsupported(ssm, "Mamba-2 chunked scan (prefill)",
                "the prefill state-space scan has no op family");
  }
  const auto n = add_layer("norm", mixer_key);
  unsupported(n, "grouped gated RMSNorm", "RMSNorm(x * silu(z)) per group has no op family");
  const auto o = add_layer("out_proj", mixer_key);
  linear(o, H, m.d_inner(), Parallel::kRow, "mixer.out_proj");
}

void Expander::dense_mlp(const std::string& parent) {
  const std::string mlp_key = key("mlp");
  add(mlp_key, parent, true, count_);
  const std::int64_t H = c_.hidden_size, I = c_.intermediate_size;
  if (!c_.gated_mlp) {
    const auto up = add_layer("up_proj", mlp_key);
    linear(up, I, H, Parallel::kColumn, "mlp.up_proj");
  } else if (c_.fused_qkv) {
    const auto gu = add_layer("gate_up_proj", mlp_key);
    linear(gu, 2 * I, H, Parallel::kColumn, "mlp.gate_up_proj");
  } else {
    const auto g = add_layer("gate_proj", mlp_key);
    linear(g, I, H, Parallel::kColumn, "mlp.gate_proj");
    const auto u = add_layer("up_proj", mlp_key);
    linear(u, I, H, Parallel::kColumn, "mlp.up_proj");
  }
  const auto act = add_layer("act_fn", mlp_key);
  act_and_mul(act, I, "MLP");
  const auto down = add_layer("down_proj", mlp_key);
  linear(down, H, I, Parallel::kRow, "mlp.down_proj");
}

// The top-k kernel after the router GEMM (sgl-kernel's moe_fused_gate, topk_softmax,
// topk_sigmoid), over every expert whatever the EP: the router is replicated.
void Expander::moe_routing(std::size_t gate) {
  const auto& m = *c_.moe;
  MoeRoutingKernel r{GateKind::kFusedGate, m.num_experts, m.top_k, m.n_group, m.topk_group, false};
  switch (m.routing) {
    case Routing::kDeepSeek:
      break;
    case Routing::kRenormalize:
    case Routing::kSoftmaxTopK:
      r = {
          GateKind::kTopkSoftmax, m.num_experts, m.top_k, 1, 1, m.routing == Routing::kRenormalize};
      break;
    case Routing::kLlama4:
      r = {GateKind::kTopkSigmoid, m.num_experts, m.top_k, 1, 1, false};
      break;
    case Routing::kSoftmaxGroupTopK:
      unsupported(gate, "group-limited softmax top-k",
                  "DeepSeek-V2's grouped softmax routing has no gate kernel (SGLang runs it in "
                  "PyTorch)",
                  Severity::kInfo);
      return;
  }
  use(gate, r);
}

void Expander::moe(const std::string& parent) {
  const auto& m = *c_.moe;
  const std::string mlp_key = key("mlp");
  add(mlp_key, parent, true, count_);
  const std::int64_t H = c_.hidden_size;
  const auto gate = add_layer("gate", mlp_key);
  use(gate, gemm(m.num_experts, H, Parallel::kReplicated, "moe.gate"));
  moe_routing(gate);
  const auto experts = add_layer("experts", mlp_key);
  const Split es = split_experts(m.num_experts, point_.ep);
  const bool ok = check(es);
  // sgl-kernel's moe_align_block_size prepares the Triton fused MoE's grouped GEMM (M tile 64,
  // its default config's) over this rank's experts.
  if (ok) use(experts, MoeAlignKernel{es.per_rank, m.top_k, 64});
  if (ok && point_.ep > 1) {
    // Expert parallelism: tokens go to the ranks of their experts and come back (dispatch and
    // combine).
    use(experts, CommKernel{CommKind::kAllToAll, H, "MoE token dispatch and combine", point_.ep});
  }
  MoeKernel k{MoeFormat::kFp8BlockScale, m.routing, m.num_experts, es.per_rank,  H,
              m.intermediate_size,       m.top_k,   m.n_group,     m.topk_group, point_.ep};
  const bool plain_swiglu = !m.expert_bias && !m.swiglu_limit && c_.activation == Activation::kSilu;
  // gpt-oss: biases on both expert GEMMs and a clamped SwiGLU, renormalize routing.
  const bool swiglu_oai = m.expert_bias && m.swiglu_limit && c_.activation == Activation::kSilu &&
                          m.routing == Routing::kRenormalize;
  const bool blocks = H % 128 == 0 && m.intermediate_size % 128 == 0;
  const bool fp8_routing = m.routing == Routing::kDeepSeek || m.routing == Routing::kRenormalize;
  if (m.expert_bias) {
    unsupported(gate, "router bias add",
                "added in the router GEMM's epilogue; not a separate kernel", Severity::kInfo);
  }
  if (swiglu_oai) {
    if (ok) {
      MoeKernel b = k;
      b.format = MoeFormat::kBf16SwigluOai;
      b.swiglu_limit = *m.swiglu_limit;
      use(experts, b);
    }
  } else if (!plain_swiglu) {
    unsupported(experts, "experts",
                fmt::format("experts with {} have no MoE op family",
                            m.expert_bias || m.swiglu_limit
                                ? "biases or a clamped SwiGLU other than gpt-oss's (renormalize "
                                  "routing, both)"
                                : "this activation"));
  } else if (!fp8_routing) {
    unsupported(
        experts, "FP8 block-scale experts",
        fmt::format(
            "{} routing has no FP8 block-scale MoE generator (DeepSeek and renormalize only)",
            routing_name(m.routing)));
  } else if (!blocks) {
    unsupported(
        experts, "FP8 block-scale experts",
        fmt::format("hidden {} and intermediate {} must be multiples of the 128-wide scale blocks",
                    H, m.intermediate_size));
  } else if (ok) {
    // The block-scale experts take their input quantized per 1x128 group, as the fp8 GEMMs do.
    if (quant_ == Quantization::kFp8Block)
      use(experts, QuantizationKernel{QuantKind::kPerTokenGroupFp8, H, 128, "moe.experts input"});
    use(experts, k);
  }
  if (opt_.include_quantized && swiglu_oai) {
    unsupported(experts, "TRT-LLM quantized variants",
                "the FP4 / FP8 per-tensor MoE families have a plain SwiGLU without expert biases",
                Severity::kInfo);
  }
  if (opt_.include_quantized && plain_swiglu) {
    if (m.routing == Routing::kRenormalize || m.routing == Routing::kLlama4) {
      if (ok) {
        for (MoeFormat f : {MoeFormat::kFp4BlockScale, MoeFormat::kFp4BlockScaleRouted,
                            MoeFormat::kFp8PerTensor}) {
          MoeKernel q = k;
          q.format = f;
          use(experts, q);
        }
      }
    } else {
      unsupported(
          experts, "TRT-LLM quantized variants",
          fmt::format(
              "the FP4 / FP8 per-tensor MoE families cover renormalize and Llama-4 routing, not {}",
              routing_name(m.routing)),
          Severity::kInfo);
    }
  }
  if (m.num_shared_experts > 0) {
    const std::string shared_key = key("shared_experts");
    add(shared_key, mlp_key, true, count_);
    const std::int64_t Is = m.shared_intermediate_size * m.num_shared_experts;
    const auto gu = add_layer("shared_gate_up_proj", shared_key);
    linear(gu, 2 * Is, H, Parallel::kColumn, "shared_experts.gate_up_proj");
    const auto act = add_layer("shared_act_fn", shared_key);
    act_and_mul(act, Is, "shared experts");
    const auto down = add_layer("shared_down_proj", shared_key);
    linear(down, H, Is, Parallel::kRow, "shared_experts.down_proj");
    if (m.shared_expert_gate) {
      const auto sg = add_layer("shared_expert_gate", shared_key);
      use(sg, gemm(1, H, Parallel::kReplicated, "shared_expert_gate"));
    }
  }
}

// One decoder layer of type `t` (count_ of them) under `parent`.
void Expander::decoder_layer(const LayerType& t, const std::string& parent) {
  const std::string layer_key = key(plan_.layer_class);
  add(layer_key, parent, true, count_);
  const bool has_mixer = t.spec.mixer != Mixer::kNone;
  const bool has_ffn = t.spec.ffn != Ffn::kNone;
  if (has_mixer && has_ffn) {
    layer_norm_in(layer_key, "input_layernorm");
  } else {
    layer_norm_in(layer_key, "norm");
  }
  switch (t.spec.mixer) {
    case Mixer::kAttention:
      attention(layer_key);
      break;
    case Mixer::kLinearAttention:
      gdn(layer_key);
      break;
    case Mixer::kMamba:
      mamba(layer_key);
      break;
    case Mixer::kLightning: {
      const auto n = add_layer("self_attn", layer_key);
      unsupported(n, "lightning attention", "MiniMax linear attention has no op family");
      break;
    }
    case Mixer::kNone:
      break;
  }
  if (has_mixer && has_ffn) {
    if (c_.sandwich_norms) {
      const auto post = add_layer("post_attention_layernorm", layer_key);
      use(post, norm(c_.hidden_size, false, "post_attention_layernorm"));
      const auto pre = add_layer("pre_feedforward_layernorm", layer_key);
      use(pre, norm(c_.hidden_size, true, "pre_feedforward_layernorm"));
    } else {
      const auto post = add_layer("post_attention_layernorm", layer_key);
      use(post, norm(c_.hidden_size, true, "post_attention_layernorm"));
    }
  }
  if (t.spec.ffn == Ffn::kDense) dense_mlp(layer_key);
  if (t.spec.ffn == Ffn::kMoe) moe(layer_key);
  if (point_.tp > 1) {
    // The row-parallel projections (attention output, MLP down) end in an all-reduce.
    const auto ar = add_layer("tp_all_reduce", layer_key);
    use(ar,
        CommKernel{CommKind::kAllReduce, c_.hidden_size,
                   "after the row-parallel attention output and MLP down projections", point_.tp});
  }
  if (has_ffn && c_.sandwich_norms) {
    const auto post = add_layer("post_feedforward_layernorm", layer_key);
    use(post, norm(c_.hidden_size, false, "post_feedforward_layernorm"));
  }
}

// The lm_head (vocabulary-parallel) and, with tp > 1, the gather of its logits.
void Expander::model_head(const std::string& parent, const std::string& prefix) {
  add(prefix + "lm_head", parent, false, count_);
  use(out_.modules.size() - 1, gemm(c_.vocab_size, c_.hidden_size, Parallel::kColumn, "lm_head"));
  if (point_.tp > 1 && c_.vocab_size % point_.tp == 0) {
    add(prefix + "logits_all_gather", parent, false, count_);
    use(out_.modules.size() - 1,
        CommKernel{CommKind::kAllGather, c_.vocab_size / point_.tp,
                   "lm_head logits, one vocabulary shard per rank", point_.tp});
  }
}

// The multi-token-prediction draft layers (SGLang's NextN / EAGLE draft model of DeepSeek V3
// and GLM-4.5): the next token's embedding and the main model's last hidden state, each
// RMSNorm'd (enorm, hnorm), concatenated and projected back to the hidden size by eh_proj (a
// bf16 linear layer, replicated), then one decoder layer shaped as the model's last, its shared
// head's norm and lm_head. The draft layer starts without a residual, so its first norm is
// plain.
void Expander::mtp_layers() {
  const LayerType* last = nullptr;
  for (const auto& t : plan_.layer_types)
    if (!t.layers.empty() && t.layers.back() == c_.num_layers - 1) last = &t;
  if (!last) return;
  const std::string block = "mtp";
  count_ = c_.num_mtp_layers;
  add(block, plan_.root_class, true, count_);
  for (const char* n : {"enorm", "hnorm"}) {
    add(fmt::format("mtp.{}", n), block, false, count_);
    use(out_.modules.size() - 1, norm(c_.hidden_size, false, n));
  }
  add("mtp.eh_proj", block, false, count_);
  use(out_.modules.size() - 1,
      gemm(c_.hidden_size, 2 * c_.hidden_size, Parallel::kReplicated, "mtp.eh_proj"));
  type_ = last;
  first_layer_ = true;
  prefix_ = "mtp.";
  decoder_layer(*last, block);
  type_ = nullptr;
  prefix_.clear();
  add("mtp.shared_head.norm", block, false, count_);
  use(out_.modules.size() - 1, norm(c_.hidden_size, true, "mtp shared head norm"));
  model_head(block, "mtp.shared_head.");
  count_ = 1;
}

Expansion Expander::run() {
  const std::string root = plan_.root_class;
  const std::string model = plan_.model_class;
  add(root, "", true, 1);
  add(model, root, true, 1);
  add("embed_tokens", model, false, 1);
  use(out_.modules.size() - 1, EmbeddingKernel{c_.vocab_size, c_.hidden_size});
  add("layers", model, true, c_.num_layers);
  multi_ = plan_.layer_types.size() > 1;
  for (const auto& t : plan_.layer_types) {
    type_ = &t;
    count_ = static_cast<std::int64_t>(t.layers.size());
    first_layer_ = !t.layers.empty() && t.layers.front() == 0;
    decoder_layer(t, "layers");
  }
  type_ = nullptr;
  multi_ = false;
  count_ = 1;
  add("norm", model, false, 1);
  use(out_.modules.size() - 1, norm(c_.hidden_size, true, "final norm"));
  model_head(root, "");
  add("sampler", root, false, 1);
  // SGLang's sampler: top-k / top-p renormalization and min-p sampling besides FlashInfer's
  // top-k / top-p samplers.
  for (SamplingKind s :
       {SamplingKind::kTopK, SamplingKind::kTopP, SamplingKind::kTopKTopP, SamplingKind::kMinP,
        SamplingKind::kTopKRenorm, SamplingKind::kTopPRenorm}) {
    use(out_.modules.size() - 1, SamplingKernel{s, c_.vocab_size});
  }
  if (opt_.mtp && c_.num_mtp_layers > 0) {
    mtp_layers();
  } else if (opt_.mtp) {
    out_.diagnostics.info("", "",
                          "--mtp: the model's config ships no multi-token-prediction "
                          "draft layers (num_nextn_predict_layers); nothing to plan");
  } else if (c_.num_mtp_layers > 0) {
    out_.unsupported.push_back(
        {"", "", "multi-token-prediction layers",
         fmt::format("{} draft layer(s) for speculative decoding are planned with --mtp",
                     c_.num_mtp_layers),
         Severity::kInfo});
  }
  return std::move(out_);
}

}  // namespace

Expansion expand_plan(const ModelPlan& plan, const ServingPoint& point,
                      const ServingOptions& options) {
  return Expander(plan, point, options).run();
}

}  // namespace fib::onboard
