// A definition as a prompt for a kernel-writing agent: what the kernel computes (description,
// axes, inputs and outputs with shapes and dtypes, constraints, the reference code), the
// workloads it will be judged on and how it is judged (policy and tolerances per output).
#pragma once

#include <string>

#include "fib/dataset/trace_set.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"

namespace fib::agent {

// The prompt's parts as JSON: {definition, op_type, description, tags, axes: [{name, kind,
// value?, description?}], inputs/outputs: [{name, shape (axis names, null for a scalar), dtype,
// description?, optional?}], constraints, reference, workloads: [{uuid, axes}], judged: {policy,
// outputs: {name: {atol, rtol, max_nmse, required_matched_ratio?}}}}. Workloads are those of
// `set`; the judgement uses fib's built-in eval config.
Json definition_prompt_json(const TraceSet& set, const Definition& def);

// The same as Markdown text, one section per part, the reference in a ```python block.
std::string definition_prompt_text(const Json& prompt);

}  // namespace fib::agent
