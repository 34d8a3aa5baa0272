// Internal to config reading: each architecture family's own fields (family_readers.cpp), read
// after the common ones (families.cpp).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "fib/onboard/model_config.h"
#include "onboard/config/config_fields.h"

namespace fib::onboard::detail {

// The first of `names` as an integer, an error naming them all when none is present.
std::optional<std::int64_t> required(ConfigFields& f, std::initializer_list<std::string_view> names,
                                     std::string_view hint = {});

void read_llama_like(ConfigFields& f, ModelConfig& cfg);
void read_mixtral(ConfigFields& f, ModelConfig& cfg);
void read_qwen_moe(ConfigFields& f, ModelConfig& cfg);
void read_qwen3_next(ConfigFields& f, ModelConfig& cfg);
void read_deepseek(ConfigFields& f, ModelConfig& cfg);
void read_gpt_oss(ConfigFields& f, ModelConfig& cfg);
void read_gemma3(ConfigFields& f, ModelConfig& cfg);
void read_glm4_moe(ConfigFields& f, ModelConfig& cfg);
void read_minimax_m2(ConfigFields& f, ModelConfig& cfg);
void read_llama4(ConfigFields& f, ModelConfig& cfg);
void read_nemotron_h(ConfigFields& f, ModelConfig& cfg);

}  // namespace fib::onboard::detail
