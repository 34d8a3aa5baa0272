// Deduplication by the FlashInfer-Trace identity rule: two definitions are the same kernel when
// they have the same op_type, the same axes (roles and const values) and the same inputs and
// outputs (names, order, shapes, dtypes). Descriptions, tags and reference texts do not count.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fib/trace/definition.h"

namespace fib::onboard {

// Whether a and b are the same kernel; when not, `difference` (if given) says what differs first
// ("input 'kv_last_page_len' shape [len_indptr] vs [batch_size]").
bool same_kernel(const Definition& a, const Definition& b, std::string* difference = nullptr);

// A canonical text of the interface (op_type, sorted axes, ordered inputs/outputs); equal
// fingerprints mean same_kernel.
std::string interface_fingerprint(const Definition& d);

// Tags with these prefixes are what onboarding adds to an existing definition it shares.
bool is_sharing_tag(std::string_view tag);  // model:, tp:, ep:

// The tags of `wanted` (sharing tags only) that `existing` lacks, in `wanted` order.
std::vector<std::string> missing_sharing_tags(const Definition& existing,
                                              const std::vector<std::string>& wanted);

}  // namespace fib::onboard
