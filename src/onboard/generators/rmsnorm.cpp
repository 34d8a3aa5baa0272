// op_type rmsnorm: rmsnorm_h{H} and fused_add_rmsnorm_h{H} (the residual add fused in front).
// Computed in fp32, rounded once; eps comes from the config and lives in the reference.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition rmsnorm(const RmsNormKernel& k, const GenContext& ctx) {
  const std::string name = fmt::format("{}rmsnorm_h{}", k.fused_add ? "fused_add_" : "", k.hidden);
  std::string description =
      k.fused_add ? fmt::format("Fused Add + RMSNorm with hidden_size={}", k.hidden)
                  : fmt::format("Root Mean Square Normalization with hidden_size={}", k.hidden);
  if (!k.role.empty()) description += fmt::format(" ({})", k.role);
  description += fmt::format(". Epsilon is fixed at {:g}.", k.eps);
  if (k.folded_offset) {
    description += " The model scales by (1 + weight); pass the weight with the 1 folded in.";
  }
  description += fmt::format(" {}", provenance(ctx));
  Builder b(name, "rmsnorm", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  if (k.fused_add) b.tag("fused");
  b.tag(k.fused_add ? "fi_api:flashinfer.norm.fused_add_rmsnorm"
                    : "fi_api:flashinfer.norm.rmsnorm");
  b.var("batch_size", "Number of rows (tokens, or tokens x heads for a per-head norm).")
      .constant("hidden_size", k.hidden, "Normalized dimension.");
  b.input("hidden_states", {"batch_size", "hidden_size"}, DType::kBFloat16, "Input rows.");
  if (k.fused_add) {
    b.input("residual", {"batch_size", "hidden_size"}, DType::kBFloat16,
            "Residual added before normalizing.");
  }
  b.input("weight", {"hidden_size"}, DType::kBFloat16, "Per-channel scale.");
  b.output("output", {"batch_size", "hidden_size"}, DType::kBFloat16, "Normalized rows.");
  b.reference(fill(k.fused_add ? templates::rmsnorm_fused_add : templates::rmsnorm,
                   {{"H", std::to_string(k.hidden)}, {"EPS", py_float(k.eps)}}));
  return b.build();
}

std::string name_of(const RmsNormKernel& k) {
  return fmt::format("{}rmsnorm_h{}", k.fused_add ? "fused_add_" : "", k.hidden);
}

}  // namespace fib::onboard::gen
