// op_type mamba_ssu: the Mamba-2 selective state update of one decode step (Nemotron-H), with
// a slot-indexed state cache.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"

namespace fib::onboard::gen {

namespace {

constexpr std::string_view kReference = R"PY(import torch
import torch.nn.functional as F


@torch.no_grad()
def run(state, x, dt, A, B, C, D, dt_bias, state_batch_indices):
    batch_size, nheads, head_dim = x.shape
    ngroups, dstate = B.shape[1], B.shape[2]
    assert nheads == @NH@
    assert head_dim == @HD@
    assert dstate == @DS@
    assert ngroups == @NG@

    heads_per_group = nheads // ngroups  # head h uses group h // heads_per_group
    dt_f = F.softplus(dt.float() + dt_bias.float())  # [B, nheads, head_dim]
    decay = torch.exp(A.float()[None] * dt_f[..., None])  # [B, nheads, head_dim, dstate]
    B_h = B.float().repeat_interleave(heads_per_group, dim=1)  # [B, nheads, dstate]
    C_h = C.float().repeat_interleave(heads_per_group, dim=1)
    inject = (dt_f * x.float())[..., None] * B_h[:, :, None, :]  # [B, nheads, head_dim, dstate]

    new_state = state.clone()  # slots no sequence points at are copied through
    output = torch.zeros((batch_size, nheads, head_dim), dtype=torch.float32, device=x.device)
    for i in range(batch_size):
        slot = int(state_batch_indices[i].item())
        if slot < 0:
            continue  # padding: no update, output 0
        s = new_state[slot].float() * decay[i] + inject[i]
        new_state[slot] = s.to(state.dtype)
        # The output reads the fp32 state, before it is rounded for storage.
        output[i] = (s * C_h[i][:, None, :]).sum(dim=-1) + x[i].float() * D.float()
    return output.to(x.dtype), new_state
)PY";

}  // namespace

Definition mamba_ssu(const MambaKernel& k, const GenContext& ctx) {
  const std::string name =
      fmt::format("mamba_ssu_decode_h{}_d{}_s{}_ng{}", k.nheads, k.head_dim, k.dstate, k.ngroups);
  Builder b(name, "mamba_ssu",
            fmt::format("Mamba2 Selective State Update (SSU) decode with {} heads, head_dim={}, "
                        "dstate={}, {} groups: "
                        "one token per sequence updates its cached SSM state. {}",
                        k.nheads, k.head_dim, k.dstate, k.ngroups,
                        provenance(ctx, fmt::format("TP={}", k.tp))));
  b.tag("stage:decode").tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.tag("fi_api:flashinfer.mamba.selective_state_update").tag(fmt::format("tp:{}", k.tp));
  b.var("batch_size", "Number of sequences being decoded concurrently.")
      .var("state_cache_size", "Slots in the SSM state cache (>= batch_size).")
      .constant("nheads", k.nheads,
                fmt::format("SSM heads per rank{}.", split_note(k.full_nheads, k.tp, k.nheads)))
      .constant("head_dim", k.head_dim, "Head dimension (mamba_head_dim).")
      .constant("dstate", k.dstate, "SSM state dimension (ssm_state_size).")
      .constant("ngroups", k.ngroups,
                "B/C groups per rank; each group serves nheads/ngroups heads.");
  b.constraint("nheads % ngroups == 0").constraint("state_cache_size >= batch_size");
  const DType bf16 = DType::kBFloat16;
  b.input("state", {"state_cache_size", "nheads", "head_dim", "dstate"}, bf16,
          "SSM state cache, indexed by state_batch_indices.")
      .input("x", {"batch_size", "nheads", "head_dim"}, bf16, "Input features.")
      .input("dt", {"batch_size", "nheads", "head_dim"}, bf16,
             "Time step before softplus(dt + dt_bias).")
      .input("A", {"nheads", "head_dim", "dstate"}, DType::kFloat32, "Decay (negative).")
      .input("B", {"batch_size", "ngroups", "dstate"}, bf16, "Input gate per group.")
      .input("C", {"batch_size", "ngroups", "dstate"}, bf16, "Output gate per group.")
      .input("D", {"nheads", "head_dim"}, bf16, "Skip connection weight.")
      .input("dt_bias", {"nheads", "head_dim"}, bf16, "Bias added to dt before softplus.")
      .input("state_batch_indices", {"batch_size"}, DType::kInt32,
             "State slot of each sequence; -1 skips it.");
  b.output("output", {"batch_size", "nheads", "head_dim"}, bf16, "y = sum_s(state * C) + x * D.")
      .output("new_state", {"state_cache_size", "nheads", "head_dim", "dstate"}, bf16,
              "The state cache with the used slots updated.");
  b.reference(fill(kReference, {{"NH", std::to_string(k.nheads)},
                                {"HD", std::to_string(k.head_dim)},
                                {"DS", std::to_string(k.dstate)},
                                {"NG", std::to_string(k.ngroups)}}));
  return b.build();
}

std::string name_of(const MambaKernel& k) {
  return fmt::format("mamba_ssu_decode_h{}_d{}_s{}_ng{}", k.nheads, k.head_dim, k.dstate,
                     k.ngroups);
}

}  // namespace fib::onboard::gen
