// The CUDA reference kernels and the checks around every call (mirrors src/reference).
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <mutex>

#include "reference_cuda/kernels.h"

namespace fib::reference_cuda {

const std::vector<std::unique_ptr<Kernel>>& kernels() {
  static const detail::KernelList list = [] {
    // In op_types.def's order. A kernel refuses another op type's definition without a reason
    // (cpu_supports asks the CPU kernel, which does), so only the order within an op type
    // decides which kernel runs and what find_kernel says.
    detail::KernelList k;
#define FIB_OP_TYPE(op, recipe, family, ref, ref_cuda, ...) \
  FIB_OP_WHEN(ref_cuda, detail::add_##op(k);)
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
    *why = reasons.empty() ? fmt::format("no CUDA reference for op_type '{}'", def.op_type)
                           : fmt::format("no CUDA reference fits: {}", fmt::join(reasons, "; "));
  }
  return nullptr;
}

DeviceOutputs run(const Definition& def, const AxisValues& var_axes, const DeviceArguments& args,
                  cudaStream_t stream, std::uint64_t seed) {
  std::string why;
  const Kernel* k = find_kernel(def, &why);
  if (k == nullptr) throw Error(def.name, why);
  const AxisValues bound =
      reference::check_inputs(def, var_axes, reference::tensor_metas(args), args.scalars);
  CallContext ctx{def, bound, stream, seed};
  DeviceOutputs out = k->run(ctx, args);
  for (const auto& spec : def.outputs) {
    auto it = out.find(spec.name);
    if (it == out.end())
      throw Error(def.name,
                  fmt::format("CUDA reference {} produced no output '{}'", k->id(), spec.name));
    reference::check_tensor(def, spec, it->second.dtype(), it->second.shape(), bound, "output");
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

void* scratch_alloc(std::size_t bytes, cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<int, cudaMemPool_t> pools;
  int device = 0;
  FIB_CUDA_CHECK(cudaGetDevice(&device));
  cudaMemPool_t pool = nullptr;
  {
    const std::lock_guard lock(mutex);
    auto it = pools.find(device);
    if (it == pools.end()) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      FIB_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
      std::uint64_t keep = kScratchKeepBytes;
      FIB_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
      it = pools.emplace(device, pool).first;
    }
    pool = it->second;
  }
  void* p = nullptr;
  FIB_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes == 0 ? 16 : bytes, pool, stream));
  return p;
}

}  // namespace detail
}  // namespace fib::reference_cuda
