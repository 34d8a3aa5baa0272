// A definition as a prompt for a kernel-writing agent: what the kernel computes (description,
// axes, inputs and outputs with shapes and dtypes, constraints, the reference code), the
// workloads it will be judged on and how it is judged (policy and tolerances per output).
#pragma once

#include <memory>
#include <string>

#include "fib/bench/eval/eval_config.h"
#include "fib/bench/run/run.h"

#include "fib/dataset/trace_set.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"

namespace fib::agent {

// The eval settings a server's evaluations run under, for the prompt's tolerances: the user's
// eval config file (null: none) over fib's built-in one, and the command line's layer.
struct PromptEval {
  std::shared_ptr<const bench::EvalConfigFile> user;
  bench::EvalSettings cli;
  // The settings of `o` (its --config file loaded; throws fib::Error when it cannot be read).
  static PromptEval of(const bench::RunOptions& o);
};

// The prompt's parts as JSON: {definition, op_type, description, tags, axes: [{name, kind,
// value?, description?}], inputs/outputs: [{name, shape (axis names, null for a scalar), dtype,
// description?, optional?}], constraints, reference, workloads: [{uuid, axes}], judged: {policy,
// outputs: {name: {atol, rtol, max_nmse, required_matched_ratio?}}}}. Workloads are those of
// `set`; the tolerances are those `eval` resolves to.
Json definition_prompt_json(const TraceSet& set, const Definition& def,
                            const PromptEval& eval = {});

// The same as Markdown text, one section per part, the reference in a ```python block.
std::string definition_prompt_text(const Json& prompt);

}  // namespace fib::agent
