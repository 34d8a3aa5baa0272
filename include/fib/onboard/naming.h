// Definition names in the dataset's convention: an op prefix, then each constant parameter as
// an abbreviation and its value (h = heads or hidden size, kv, d, ps, ckv, kpe, e, i, topk, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "fib/onboard/kernel_spec.h"

namespace fib::onboard {

// The name of the definition a kernel spec generates (each op type's beside its generator,
// src/onboard/generators/<op_type>.cpp).
std::string definition_name(const KernelSpec& k);

// "rope_with_cos_sin_cache_neox_style" / "..._gptj_style".
std::string_view rope_style_name(RopeStyle s);
// "top_k", "top_p", "top_k_top_p".
std::string_view sampling_kind_name(SamplingKind k);

// `base` if free, else base_v2, base_v3, ... (the first for which `taken` is false). A new
// interface under an existing name keeps the old definition and takes a versioned name.
std::string versioned_name(std::string_view base,
                           const std::function<bool(std::string_view)>& taken);

}  // namespace fib::onboard
