// The list of reference kernels and the checks around every reference call.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <regex>
#include <thread>

#include "fib/trace/suggest.h"
#include "reference/kernels.h"

namespace fib::reference {

bool Arguments::has(std::string_view name) const {
  return tensors.find(name) != tensors.end() || scalars.find(name) != scalars.end();
}

const Tensor& Arguments::tensor(std::string_view name) const {
  auto it = tensors.find(name);
  if (it == tensors.end())
    throw Error(std::string(name), "the reference needs this tensor input, and it was not given");
  return it->second;
}

double Arguments::scalar_double(std::string_view name) const {
  auto it = scalars.find(name);
  if (it == scalars.end())
    throw Error(std::string(name), "the reference needs this scalar input, and it was not given");
  return std::visit([](auto v) { return static_cast<double>(v); }, it->second);
}

std::int64_t Arguments::scalar_int(std::string_view name) const {
  auto it = scalars.find(name);
  if (it == scalars.end())
    throw Error(std::string(name), "the reference needs this scalar input, and it was not given");
  return std::visit([](auto v) { return static_cast<std::int64_t>(v); }, it->second);
}

const std::vector<std::unique_ptr<Kernel>>& kernels() {
  static const std::vector<std::unique_ptr<Kernel>> list = [] {
    std::vector<std::unique_ptr<Kernel>> k;
    k.push_back(detail::make_gemm());
    k.push_back(detail::make_rmsnorm());
    k.push_back(detail::make_gqa_paged());
    k.push_back(detail::make_gqa_ragged());
    k.push_back(detail::make_mla_paged());
    k.push_back(detail::make_mla_ragged());
    k.push_back(detail::make_dsa_sparse_attention());
    k.push_back(detail::make_dsa_topk_indexer());
    k.push_back(detail::make_moe());
    k.push_back(detail::make_gdn());
    k.push_back(detail::make_sampling());
    k.push_back(detail::make_mamba_ssu());
    k.push_back(detail::make_rope());
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

namespace {

void check_tensor(const Definition& def, const TensorSpec& spec, const Tensor& t,
                  const AxisValues& bound, const char* role) {
  if (t.dtype() != spec.dtype) {
    throw Error(def.name, fmt::format("{} '{}' is {}, the definition says {}", role, spec.name,
                                      dtype_name(t.dtype()), dtype_name(spec.dtype)));
  }
  auto want = def.concrete_shape(spec, bound);
  if (want && *want != t.shape()) {
    throw Error(def.name, fmt::format("{} '{}' has shape {}, the axes give {}", role, spec.name,
                                      shape_to_string(t.shape()), shape_to_string(*want)));
  }
}

}  // namespace

Outputs run(const Definition& def, const AxisValues& var_axes, const Arguments& args,
            unsigned threads, std::uint64_t seed) {
  std::string why;
  const Kernel* k = find_kernel(def, &why);
  if (k == nullptr) throw Error(def.name, why);
  auto bound = def.bind_axes(var_axes);
  if (!bound) {
    throw Error(def.name, fmt::format("a var axis has no value (var axes: {})",
                                      fmt::join(def.var_axes(), ", ")));
  }
  for (const auto& spec : def.inputs) {
    if (spec.is_scalar()) {
      if (!args.scalars.count(spec.name) && !spec.is_optional()) {
        throw Error(def.name, fmt::format("scalar input '{}' was not given", spec.name));
      }
      continue;
    }
    auto it = args.tensors.find(spec.name);
    if (it == args.tensors.end()) {
      if (spec.is_optional()) continue;
      throw Error(def.name, fmt::format("input '{}' was not given", spec.name),
                  suggest(spec.name, def.input_names()));
    }
    check_tensor(def, spec, it->second, *bound, "input");
  }
  CallContext ctx{def, *bound,
                  threads ? threads : std::max(1u, std::thread::hardware_concurrency()), seed};
  Outputs out = k->run(ctx, args);
  for (const auto& spec : def.outputs) {
    auto it = out.find(spec.name);
    if (it == out.end())
      throw Error(def.name,
                  fmt::format("reference {} produced no output '{}'", k->id(), spec.name));
    check_tensor(def, spec, it->second, *bound, "output");
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
