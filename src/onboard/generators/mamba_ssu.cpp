// op_type mamba_ssu: the Mamba-2 selective state update of one decode step (Nemotron-H), with
// a slot-indexed state cache.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

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
  b.reference(fill(templates::mamba_ssu, {{"NH", std::to_string(k.nheads)},
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
