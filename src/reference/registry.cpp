// The list of reference kernels and the checks around every reference call.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <regex>
#include <thread>

#include "fib/trace/suggest.h"
#include "reference/kernels.h"

namespace fib::reference {

void throw_missing_input(std::string_view name, std::string_view kind) {
  throw Error(std::string(name),
              fmt::format("the reference needs this {} input, and it was not given", kind));
}

const std::vector<std::unique_ptr<Kernel>>& kernels() {
  static const std::vector<std::unique_ptr<Kernel>> list = [] {
    // In op_types.def's order. A kernel refuses another op type's definition without a reason,
    // so only the order within an op type decides which kernel runs and what find_kernel says.
    detail::KernelList k;
#define FIB_OP_TYPE(op, recipe, family, ref, ...) FIB_OP_WHEN(ref, detail::add_##op(k);)
#include "fib/trace/op_types.def"
    return k;
  }();
  return list;
}

const Kernel* find_kernel(const Definition& def, std::string* why) {
  std::vector<std::string> reasons;
  for (const auto& k : kernels()) {
    std::string w;
    if (k->supports(def, &w)) return k.get();
    if (!w.empty()) reasons.push_back(fmt::format("{}: {}", k->id(), w));
  }
  if (why) {
    *why = reasons.empty() ? fmt::format("no native reference for op_type '{}'", def.op_type)
                           : fmt::format("no native reference fits: {}", fmt::join(reasons, "; "));
  }
  return nullptr;
}

void check_tensor(const Definition& def, const TensorSpec& spec, DType dtype, const Shape& shape,
                  const AxisValues& bound, const char* role) {
  if (dtype != spec.dtype) {
    throw Error(def.name, fmt::format("{} '{}' is {}, the definition says {}", role, spec.name,
                                      dtype_name(dtype), dtype_name(spec.dtype)));
  }
  auto want = def.concrete_shape(spec, bound);
  if (want && *want != shape) {
    throw Error(def.name, fmt::format("{} '{}' has shape {}, the axes give {}", role, spec.name,
                                      shape_to_string(shape), shape_to_string(*want)));
  }
}

AxisValues check_inputs(const Definition& def, const AxisValues& var_axes,
                        const std::map<std::string, std::pair<DType, Shape>, std::less<>>& tensors,
                        const std::map<std::string, Scalar, std::less<>>& scalars) {
  auto bound = def.bind_axes(var_axes);
  if (!bound) {
    throw Error(def.name, fmt::format("a var axis has no value (var axes: {})",
                                      fmt::join(def.var_axes(), ", ")));
  }
  for (const auto& spec : def.inputs) {
    if (spec.is_scalar()) {
      if (!scalars.count(spec.name) && !spec.is_optional()) {
        throw Error(def.name, fmt::format("scalar input '{}' was not given", spec.name));
      }
      continue;
    }
    auto it = tensors.find(spec.name);
    if (it == tensors.end()) {
      if (spec.is_optional()) continue;
      throw Error(def.name, fmt::format("input '{}' was not given", spec.name),
                  suggest(spec.name, def.input_names()));
    }
    check_tensor(def, spec, it->second.first, it->second.second, *bound, "input");
  }
  return *bound;
}

Outputs run(const Definition& def, const AxisValues& var_axes, const Arguments& args,
            unsigned threads, std::uint64_t seed) {
  std::string why;
  const Kernel* k = find_kernel(def, &why);
  if (k == nullptr) throw Error(def.name, why);
  const AxisValues bound = check_inputs(def, var_axes, tensor_metas(args), args.scalars);
  CallContext ctx{def, bound, threads ? threads : std::max(1u, std::thread::hardware_concurrency()),
                  seed};
  Outputs out = k->run(ctx, args);
  for (const auto& spec : def.outputs) {
    auto it = out.find(spec.name);
    if (it == out.end())
      throw Error(def.name,
                  fmt::format("reference {} produced no output '{}'", k->id(), spec.name));
    check_tensor(def, spec, it->second.dtype(), it->second.shape(), bound, "output");
  }
  return out;
}

std::map<std::string, double, std::less<>> reference_constants(const Definition& def) {
  std::map<std::string, double, std::less<>> out;
  for (const auto& c : reference_constant_assignments(def))
    out.emplace(c.name, c.value);  // first wins
  return out;
}

namespace detail {

std::int64_t axis(const CallContext& ctx, std::string_view name) {
  auto v = axis_value(ctx.axes, name);
  if (!v)
    throw Error(ctx.definition.name,
                fmt::format("the reference needs axis '{}', which is not defined", name));
  return *v;
}

Tensor make_output(const CallContext& ctx, std::string_view name) {
  const TensorSpec* spec = ctx.definition.output(name);
  if (!spec)
    throw Error(ctx.definition.name, fmt::format("the definition has no output '{}'", name));
  auto shape = ctx.definition.concrete_shape(*spec, ctx.axes);
  if (!shape) throw Error(ctx.definition.name, fmt::format("cannot size output '{}'", name));
  return Tensor(spec->dtype, *shape);
}

bool name_has(const Definition& def, std::string_view token) {
  return def.name.find(token) != std::string::npos;
}

}  // namespace detail
}  // namespace fib::reference
