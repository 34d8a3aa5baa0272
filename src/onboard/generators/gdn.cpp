// op_type gdn: Gated Delta Net linear attention (Qwen3-Next), decode / mtp (multi-token
// verification) / prefill, with the recurrent state in the k-last layout [.., H, V, K].
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition gdn(const GdnKernel& k, const GenContext& ctx) {
  const std::string stage(stage_name(k.stage));
  const std::string name =
      fmt::format("gdn_{}_qk{}_v{}_d{}_k_last", stage, k.qk_heads, k.v_heads, k.head_size);
  std::string what;
  switch (k.stage) {
    case Stage::kDecode:
      what = "Gated Delta Net decode (one token per sequence) with recurrent state update";
      break;
    case Stage::kMtp:
      what =
          "Gated Delta Net multi-token verification (speculative decoding: T > 1 tokens per "
          "sequence, state "
          "pool, optional intermediate states, pool left unchanged)";
      break;
    case Stage::kPrefill:
      what = "Gated Delta Net prefill over variable-length sequences (cu_seqlens)";
      break;
  }
  Builder b(
      name, "gdn",
      fmt::format("{}; GVA with {} q/k heads and {} value heads, k-last state layout [H, V, K]. {}",
                  what, k.qk_heads, k.v_heads, provenance(ctx, fmt::format("TP={}", k.tp))));
  b.tag(fmt::format("stage:{}", stage))
      .tag(std::string(kStatusTag))
      .tag(model_tag(ctx))
      .tag("layout:k-last");
  if (k.stage == Stage::kDecode) b.tag("fi_api:flashinfer.gdn.gated_delta_rule_decode");
  if (k.stage == Stage::kPrefill) b.tag("fi_api:flashinfer.gdn.chunk_gated_delta_rule");
  b.tag(fmt::format("tp:{}", k.tp));

  const std::string qk_note = split_note(k.full_qk_heads, k.tp, k.qk_heads);
  const std::string v_note = split_note(k.full_v_heads, k.tp, k.v_heads);
  auto head_axes = [&] {
    b.constant("num_q_heads", k.qk_heads, fmt::format("Number of query heads per rank{}.", qk_note))
        .constant("num_k_heads", k.qk_heads,
                  fmt::format("Number of key heads per rank{}.", qk_note))
        .constant("num_v_heads", k.v_heads,
                  fmt::format(
                      "Number of value heads per rank{} (GVA: more value heads than query heads).",
                      v_note))
        .constant("head_size", k.head_size, "Head dimension (K of queries/keys, V of values).");
  };
  const DType bf16 = DType::kBFloat16;
  const DType f32 = DType::kFloat32;
  auto gate_inputs = [&](std::vector<std::string> rows) {
    auto with = [&](std::string last) {
      auto r = rows;
      r.push_back(std::move(last));
      return r;
    };
    b.input("A_log", {"num_v_heads"}, f32,
            "Log decay parameter: g = exp(-exp(A_log) * softplus(a + dt_bias)).")
        .input("a", with("num_v_heads"), bf16, "Input-dependent decay from the projection.")
        .input("dt_bias", {"num_v_heads"}, f32, "Decay bias, added to a before softplus.")
        .input("b", with("num_v_heads"), bf16, "Update gate input: beta = sigmoid(b).");
  };
  const std::vector<std::string> bt = {"batch_size", "seq_len"};
  auto tensor = [](std::vector<std::string> rows, std::string heads, bool dim) {
    rows.push_back(std::move(heads));
    if (dim) rows.emplace_back("head_size");
    return rows;
  };
  b.constraint("num_v_heads >= num_q_heads")
      .constraint("num_v_heads % num_q_heads == 0")
      .constraint("num_k_heads == num_q_heads");
  if (k.stage == Stage::kDecode) {
    b.var("batch_size", "Number of sequences being decoded concurrently.")
        .constant("seq_len", 1, "One token per sequence.");
    head_axes();
    b.input("q", tensor(bt, "num_q_heads", true), bf16, "Query tensor.")
        .input("k", tensor(bt, "num_k_heads", true), bf16, "Key tensor.")
        .input("v", tensor(bt, "num_v_heads", true), bf16, "Value tensor.")
        .input("state", {"batch_size", "num_v_heads", "head_size", "head_size"}, f32,
               "Recurrent state in k-last layout [B, H, V, K]; None means zeros.", true);
    gate_inputs(bt);
    b.scalar("scale", f32, "Output scale. Default (None or 0) is 1/sqrt(head_size).");
    b.output("output", tensor(bt, "num_v_heads", true), bf16,
             "Attention output, one row per value head.")
        .output("new_state", {"batch_size", "num_v_heads", "head_size", "head_size"}, f32,
                "Updated recurrent state in k-last layout [B, H, V, K].");
    // gdn_core: the gate and the delta-rule step every stage shares.
    b.reference(fill(templates::gdn_decode, {{"CORE", std::string(templates::gdn_core)},
                                             {"HQ", std::to_string(k.qk_heads)},
                                             {"HV", std::to_string(k.v_heads)},
                                             {"D", std::to_string(k.head_size)}}));
  } else if (k.stage == Stage::kMtp) {
    b.var("batch_size", "Number of sequences being verified concurrently.")
        .var("seq_len", "Tokens per sequence (T > 1).");
    head_axes();
    b.var("pool_size", "Number of states in the state pool.");
    b.constraint("seq_len > 1");
    b.input("q", tensor(bt, "num_q_heads", true), bf16, "Query tensor.")
        .input("k", tensor(bt, "num_k_heads", true), bf16, "Key tensor.")
        .input("v", tensor(bt, "num_v_heads", true), bf16, "Value tensor.")
        .input("initial_state", {"pool_size", "num_v_heads", "head_size", "head_size"}, f32,
               "State pool in k-last layout [pool_size, H, V, K].")
        .input("initial_state_indices", {"batch_size"}, DType::kInt32,
               "Pool slot of each sequence.");
    gate_inputs(bt);
    b.scalar("scale", f32, "Output scale. Default (None or 0) is 1/sqrt(head_size).")
        .input("intermediate_states_buffer",
               {"pool_size", "seq_len", "num_v_heads", "head_size", "head_size"}, f32,
               "Optional buffer receiving the state after each token (for rollback), written in "
               "place.",
               true);
    b.output("output", tensor(bt, "num_v_heads", true), bf16, "Attention output for every token.")
        .output("final_state", {"pool_size", "num_v_heads", "head_size", "head_size"}, f32,
                "The state pool, unchanged (verification does not commit).");
    b.reference(fill(templates::gdn_mtp, {{"CORE", std::string(templates::gdn_core)},
                                          {"HQ", std::to_string(k.qk_heads)},
                                          {"HV", std::to_string(k.v_heads)},
                                          {"D", std::to_string(k.head_size)}}));
  } else {
    b.var("total_seq_len", "Total tokens across all sequences.")
        .var("num_seqs", "Number of sequences.");
    head_axes();
    b.var("len_cu_seqlens", "Length of cu_seqlens (num_seqs + 1).");
    b.constraint("len_cu_seqlens == num_seqs + 1")
        .constraint("total_seq_len == cu_seqlens[-1].item()");
    const std::vector<std::string> t = {"total_seq_len"};
    b.input("q", tensor(t, "num_q_heads", true), bf16, "Query tensor.")
        .input("k", tensor(t, "num_k_heads", true), bf16, "Key tensor.")
        .input("v", tensor(t, "num_v_heads", true), bf16, "Value tensor.")
        .input("state", {"num_seqs", "num_v_heads", "head_size", "head_size"}, f32,
               "Initial state per sequence in k-last layout [N, H, V, K]; None means zeros.", true);
    gate_inputs(t);
    b.input("cu_seqlens", {"len_cu_seqlens"}, DType::kInt64, "Cumulative sequence lengths.")
        .scalar("scale", f32, "Output scale. Default (None or 0) is 1/sqrt(head_size).");
    b.output("output", tensor(t, "num_v_heads", true), bf16,
             "Attention output, one row per value head.")
        .output("new_state", {"num_seqs", "num_v_heads", "head_size", "head_size"}, f32,
                "Final state per sequence in k-last layout [N, H, V, K].");
    b.reference(fill(templates::gdn_prefill, {{"CORE", std::string(templates::gdn_core)},
                                              {"HQ", std::to_string(k.qk_heads)},
                                              {"HV", std::to_string(k.v_heads)},
                                              {"D", std::to_string(k.head_size)}}));
  }
  return b.build();
}

std::string name_of(const GdnKernel& k) {
  return fmt::format("gdn_{}_qk{}_v{}_d{}_k_last", stage_name(k.stage), k.qk_heads, k.v_heads,
                     k.head_size);
}

}  // namespace fib::onboard::gen
