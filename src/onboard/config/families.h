// The architecture families: how each is recognized (model_type, architectures) and what its
// config fields mean beyond the common ones (MoE layout, MLA, hybrid layers, norms, RoPE).
#pragma once

#include <optional>
#include <string_view>

#include "fib/onboard/model_config.h"
#include "onboard/config/config_fields.h"

namespace fib::onboard::detail {

std::optional<Family> family_from_model_type(std::string_view model_type);
std::optional<Family> family_from_architecture(std::string_view architecture);

// Reads the fields common to every family into cfg (sizes, heads, norm eps, activation, RoPE).
void read_common(ConfigFields& f, Family family, ModelConfig& cfg);

// Reads the family's own fields and sets the layer layout. Runs after read_common.
void read_family(ConfigFields& f, ModelConfig& cfg);

}  // namespace fib::onboard::detail
