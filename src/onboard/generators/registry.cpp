// Dispatch from a KernelSpec to its op type's generator, and the op_type of each spec, as
// fib/trace/op_types.def lists them.
#include <fmt/format.h>

#include <iterator>

#include "onboard/generators/families.h"

namespace fib::onboard {

namespace {

// One overload per KernelSpec alternative (the FIB_OP_KERNEL lines of fib/trace/op_types.def).
struct Generate {
  const GenContext& ctx;
#define FIB_OP_KERNEL(op, kernel, generator) \
  Definition operator()(const kernel& k) const { return gen::generator(k, ctx); }
#include "fib/trace/op_types.def"
};

struct OpType {
#define FIB_OP_KERNEL(op, kernel, generator) \
  std::string_view operator()(const kernel&) const { return #op; }
#include "fib/trace/op_types.def"
};

}  // namespace

Definition generate_definition(const KernelSpec& k, const GenContext& ctx) {
  return std::visit(Generate{ctx}, k);
}

std::string_view op_type_of(const KernelSpec& k) { return std::visit(OpType{}, k); }

std::vector<LegacyInterface> legacy_interfaces(const Definition& canonical) {
#define FIB_OP_TYPE(op, recipe, family, ref, ref_cuda, legacy) \
  FIB_OP_WHEN(legacy, if (canonical.op_type == #op) return gen::op##_legacy(canonical);)
#include "fib/trace/op_types.def"
  return {};
}

std::vector<std::string> generated_op_types() { return {std::begin(kOpTypes), std::end(kOpTypes)}; }

}  // namespace fib::onboard
