// Matching a call to a definition: which definitions name its API, and whether its tensors fit
// one (dtypes, ranks, const axes, var axes consistent); then the checks of its contents.
#pragma once

#include <string>
#include <vector>

#include "call_dump.h"
#include "fib/trace/definition.h"

namespace fib::import {

// Whether `def`'s fi_api tag names `function_name` ("flashinfer.norm.rmsnorm" names "rmsnorm";
// "flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper" names its ".run").
bool names_api(const Definition& def, std::string_view function_name);

struct Binding {
  AxisValues axes;                                      // var axes, in definition order
  std::vector<std::pair<std::string, Tensor>> tensors;  // tensor inputs, in definition order
  std::vector<std::pair<std::string, Json>> scalars;    // scalar inputs
  // Inputs matched by position because no argument has their name ("hidden_states <- input").
  std::vector<std::string> notes;
};

// Binds `call` to `def`; on a mismatch returns nullopt and sets *why ("$.inputs.weight: dtype
// float32, the definition's is bfloat16").
std::optional<Binding> bind(const Definition& def, const Call& call, std::string* why);

// The definition's constraints over the bound tensors, and the index tensors' structure (indptr
// from 0 and non-decreasing; page indices inside [0, num_pages)); one message per violation.
std::vector<std::string> sanitize(const Definition& def, const Binding& b);

}  // namespace fib::import
