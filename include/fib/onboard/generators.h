// Definition generators, one per op family (src/onboard/generators/<op_type>.cpp): each turns a
// KernelSpec into a complete Definition (name, description, tags, axes, constraints, inputs,
// outputs and a PyTorch reference with a top-level run) in the dataset's conventions.
#pragma once

#include <string>
#include <vector>

#include "fib/onboard/kernel_spec.h"
#include "fib/trace/definition.h"

namespace fib::onboard {

// Who the definition is generated for (tags and descriptions).
struct GenContext {
  std::string model_slug;    // model:<slug>
  std::string display_name;  // "Llama 3.1 8B"
};

// The complete definition of a kernel. The result passes definition_from_json (structure) and
// check_definition_reference (run() parameters are the inputs, in order).
Definition generate_definition(const KernelSpec& k, const GenContext& ctx);

// An interface the dataset has used for the same kernel before the current convention (e.g. a
// prefill kv_last_page_len shaped [len_indptr]). Deduplication accepts an existing definition
// that matches one, instead of creating a versioned duplicate, and says so.
struct LegacyInterface {
  Definition def;  // the canonical definition with the legacy axes/inputs/outputs
  std::string note;
};
std::vector<LegacyInterface> legacy_interfaces(const Definition& canonical);

// The op_type names that have a generator, in a stable order.
std::vector<std::string> generated_op_types();

}  // namespace fib::onboard
