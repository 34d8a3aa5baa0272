// The CUDA reference kernels and the checks around every call (mirrors src/reference).
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fib/trace/suggest.h"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda {

bool DeviceArguments::has(std::string_view name) const {
  return tensors.find(name) != tensors.end() || scalars.find(name) != scalars.end();
}

const DeviceTensor& DeviceArguments::tensor(std::string_view name) const {
  auto it = tensors.find(name);
  if (it == tensors.end())
    throw Error(std::string(name), "the reference needs this tensor input, and it was not given");
  return it->second;
}

double DeviceArguments::scalar_double(std::string_view name) const {
  auto it = scalars.find(name);
  if (it == scalars.end())
    throw Error(std::string(name), "the reference needs this scalar input, and it was not given");
  return std::visit([](auto v) { return static_cast<double>(v); }, it->second);
}

std::int64_t DeviceArguments::scalar_int(std::string_view name) const {
  auto it = scalars.find(name);
  if (it == scalars.end())
    throw Error(std::string(name), "the reference needs this scalar input, and it was not given");
  return std::visit([](auto v) { return static_cast<std::int64_t>(v); }, it->second);
}

const std::vector<std::unique_ptr<Kernel>>& kernels() {
  static const detail::KernelList list = [] {
    detail::KernelList k;
    detail::add_core_kernels(k);
    detail::add_attention_kernels(k);
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
    *why = reasons.empty() ? fmt::format("no CUDA reference for op_type '{}'", def.op_type)
                           : fmt::format("no CUDA reference fits: {}", fmt::join(reasons, "; "));
  }
  return nullptr;
}

namespace {

template <typename T>
void check_tensor(const Definition& def, const TensorSpec& spec, const T& t,
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

DeviceOutputs run(const Definition& def, const AxisValues& var_axes, const DeviceArguments& args,
                  cudaStream_t stream, std::uint64_t seed) {
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
      if (!args.scalars.count(spec.name) && !spec.is_optional())
        throw Error(def.name, fmt::format("scalar input '{}' was not given", spec.name));
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
  CallContext ctx{def, *bound, stream, seed};
  DeviceOutputs out = k->run(ctx, args);
  for (const auto& spec : def.outputs) {
    auto it = out.find(spec.name);
    if (it == out.end())
      throw Error(def.name,
                  fmt::format("CUDA reference {} produced no output '{}'", k->id(), spec.name));
    check_tensor(def, spec, it->second, *bound, "output");
  }
  return out;
}

reference::Outputs run_on_host_arguments(const Definition& def, const AxisValues& var_axes,
                                         const reference::Arguments& args, cudaStream_t stream,
                                         std::uint64_t seed) {
  DeviceArguments dargs;
  for (const auto& [name, t] : args.tensors)
    dargs.tensors.emplace(name, cuda::to_device(t, stream));
  dargs.scalars = args.scalars;
  DeviceOutputs dout = run(def, var_axes, dargs, stream, seed);
  FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
  reference::Outputs out;
  for (const auto& [name, t] : dout) out.emplace(name, cuda::to_host(t, stream));
  return out;
}

namespace detail {

bool cpu_supports(std::string_view cpu_id, const Definition& def, std::string* why) {
  for (const auto& k : reference::kernels()) {
    if (k->id() != cpu_id) continue;
    std::string w;
    bool ok = k->supports(def, &w);
    if (!ok && why) *why = w;
    return ok;
  }
  if (why) *why = fmt::format("no CPU reference '{}' to follow", cpu_id);
  return false;
}

std::int64_t axis(const CallContext& ctx, std::string_view name) {
  auto v = axis_value(ctx.axes, name);
  if (!v)
    throw Error(ctx.definition.name,
                fmt::format("the CUDA reference needs axis '{}', which is not defined", name));
  return *v;
}

DeviceTensor make_output(const CallContext& ctx, std::string_view name) {
  const TensorSpec* spec = ctx.definition.output(name);
  if (!spec)
    throw Error(ctx.definition.name, fmt::format("the definition has no output '{}'", name));
  auto shape = ctx.definition.concrete_shape(*spec, ctx.axes);
  if (!shape) throw Error(ctx.definition.name, fmt::format("cannot size output '{}'", name));
  return DeviceTensor(spec->dtype, *shape);
}

double reference_constant(const Definition& def, std::initializer_list<std::string_view> keys) {
  const auto c = reference::reference_constants(def);
  for (auto key : keys) {
    if (auto it = c.find(key); it != c.end()) return it->second;
  }
  throw Error(def.name,
              fmt::format("the reference fixes none of the constants {}", fmt::join(keys, ", ")));
}

}  // namespace detail
}  // namespace fib::reference_cuda
