#include "fib/onboard/naming.h"

#include <fmt/format.h>

#include "onboard/generators/families.h"

namespace fib::onboard {

// Each kernel's name is beside its generator (generators/<op_type>.cpp).
std::string definition_name(const KernelSpec& k) {
  return std::visit([](const auto& kernel) { return gen::name_of(kernel); }, k);
}

std::string_view rope_style_name(RopeStyle s) {
  return s == RopeStyle::kNeox ? "rope_with_cos_sin_cache_neox_style"
                               : "rope_with_cos_sin_cache_gptj_style";
}

std::string_view sampling_kind_name(SamplingKind k) {
  switch (k) {
    case SamplingKind::kTopK:
      return "top_k";
    case SamplingKind::kTopP:
      return "top_p";
    case SamplingKind::kTopKTopP:
      return "top_k_top_p";
    case SamplingKind::kMinP:
      return "min_p";
    case SamplingKind::kTopKRenorm:
      return "top_k_renorm";
    case SamplingKind::kTopPRenorm:
      return "top_p_renorm";
  }
  return "?";
}

std::string versioned_name(std::string_view base,
                           const std::function<bool(std::string_view)>& taken) {
  if (!taken(base)) return std::string(base);
  for (int v = 2;; ++v) {
    std::string candidate = fmt::format("{}_v{}", base, v);
    if (!taken(candidate)) return candidate;
  }
}

}  // namespace fib::onboard
