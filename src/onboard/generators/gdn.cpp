// op_type gdn: Gated Delta Net linear attention (Qwen3-Next), decode / mtp (multi-token
// verification) / prefill, with the recurrent state in the k-last layout [.., H, V, K].
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"

namespace fib::onboard::gen {

namespace {

// The gate and the delta-rule step every stage shares.
constexpr std::string_view kCore = R"PY(def _gates(A_log, a, dt_bias, b):
    # decay g = exp(-exp(A_log) * softplus(a + dt_bias)); update strength beta = sigmoid(b)
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    return g, torch.sigmoid(b.float())


def _step(state, q, k, v, g, beta, scale):
    # One token for every value head. state: [H, K, V]; q, k: [H, K]; v: [H, V]; g, beta: [H].
    state = g[:, None, None] * state
    predicted = torch.einsum("hk,hkv->hv", k, state)
    target = beta[:, None] * v + (1.0 - beta[:, None]) * predicted
    state = state + torch.einsum("hk,hv->hkv", k, target - predicted)
    return state, scale * torch.einsum("hk,hkv->hv", q, state)
)PY";

constexpr std::string_view kDecode = R"PY(import math

import torch
import torch.nn.functional as F


@CORE@

@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    batch_size, seq_len, num_q_heads, head_size = q.shape
    num_k_heads, num_v_heads = k.shape[2], v.shape[2]
    assert seq_len == 1
    assert num_q_heads == @HQ@
    assert num_k_heads == @HQ@
    assert num_v_heads == @HV@
    assert head_size == @D@
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(head_size)

    g, beta = _gates(A_log, a, dt_bias, b)  # [B, 1, HV]
    # value head h reads q/k head h // (HV / HQ)
    qe = q.float().repeat_interleave(num_v_heads // num_q_heads, dim=2)
    ke = k.float().repeat_interleave(num_v_heads // num_k_heads, dim=2)
    if state is None:
        state = torch.zeros((batch_size, num_v_heads, head_size, head_size), dtype=torch.float32, device=q.device)
    output = torch.zeros((batch_size, 1, num_v_heads, head_size), dtype=torch.bfloat16, device=q.device)
    new_state = torch.zeros((batch_size, num_v_heads, head_size, head_size), dtype=torch.float32, device=q.device)
    for i in range(batch_size):
        s = state[i].float().transpose(-1, -2)  # k-last [H, V, K] -> [H, K, V]
        s, o = _step(s, qe[i, 0], ke[i, 0], v[i, 0].float(), g[i, 0], beta[i, 0], scale)
        output[i, 0] = o.to(torch.bfloat16)
        new_state[i] = s.transpose(-1, -2)
    return output, new_state
)PY";

constexpr std::string_view kMtp = R"PY(import math

import torch
import torch.nn.functional as F


@CORE@

@torch.no_grad()
def run(q, k, v, initial_state, initial_state_indices, A_log, a, dt_bias, b, scale, intermediate_states_buffer=None):
    batch_size, seq_len, num_q_heads, head_size = q.shape
    num_k_heads, num_v_heads = k.shape[2], v.shape[2]
    assert seq_len > 1
    assert num_q_heads == @HQ@
    assert num_k_heads == @HQ@
    assert num_v_heads == @HV@
    assert head_size == @D@
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(head_size)

    g, beta = _gates(A_log, a, dt_bias, b)  # [B, T, HV]
    qe = q.float().repeat_interleave(num_v_heads // num_q_heads, dim=2)
    ke = k.float().repeat_interleave(num_v_heads // num_k_heads, dim=2)
    output = torch.zeros((batch_size, seq_len, num_v_heads, head_size), dtype=torch.bfloat16, device=q.device)
    for i in range(batch_size):
        slot = int(initial_state_indices[i].item())
        s = initial_state[slot].float().transpose(-1, -2)  # k-last [H, V, K] -> [H, K, V]
        for t in range(seq_len):
            s, o = _step(s, qe[i, t], ke[i, t], v[i, t].float(), g[i, t], beta[i, t], scale)
            output[i, t] = o.to(torch.bfloat16)
            if intermediate_states_buffer is not None:
                intermediate_states_buffer[slot, t] = s.transpose(-1, -2)
    # Verification does not commit: the pool is returned unchanged (disable_state_update=True);
    # the state after the accepted tokens is taken from intermediate_states_buffer.
    return output, initial_state.clone()
)PY";

constexpr std::string_view kPrefill = R"PY(import math

import torch
import torch.nn.functional as F


@CORE@

@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    total_seq_len, num_q_heads, head_size = q.shape
    num_k_heads, num_v_heads = k.shape[1], v.shape[1]
    num_seqs = cu_seqlens.shape[0] - 1
    assert num_q_heads == @HQ@
    assert num_k_heads == @HQ@
    assert num_v_heads == @HV@
    assert head_size == @D@
    assert total_seq_len == cu_seqlens[-1].item()
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(head_size)

    g, beta = _gates(A_log, a, dt_bias, b)  # [T, HV]
    qe = q.float().repeat_interleave(num_v_heads // num_q_heads, dim=1)
    ke = k.float().repeat_interleave(num_v_heads // num_k_heads, dim=1)
    output = torch.zeros((total_seq_len, num_v_heads, head_size), dtype=torch.bfloat16, device=q.device)
    # A sequence of length 0 leaves its new state at zero.
    new_state = torch.zeros((num_seqs, num_v_heads, head_size, head_size), dtype=torch.float32, device=q.device)
    for n in range(num_seqs):
        begin, end = int(cu_seqlens[n].item()), int(cu_seqlens[n + 1].item())
        if end <= begin:
            continue
        if state is None:
            s = torch.zeros((num_v_heads, head_size, head_size), dtype=torch.float32, device=q.device)
        else:
            s = state[n].float().transpose(-1, -2)  # k-last [H, V, K] -> [H, K, V]
        for t in range(begin, end):
            s, o = _step(s, qe[t], ke[t], v[t].float(), g[t], beta[t], scale)
            output[t] = o.to(torch.bfloat16)
        new_state[n] = s.transpose(-1, -2)
    return output, new_state
)PY";

}  // namespace

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
    b.reference(fill(kDecode, {{"CORE", std::string(kCore)},
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
    b.reference(fill(kMtp, {{"CORE", std::string(kCore)},
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
    b.reference(fill(kPrefill, {{"CORE", std::string(kCore)},
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
