// The CUDA worker's targets (bench/worker/gpu_targets.h).
#ifdef FIB_HAVE_CUDA

#include "gpu_targets.h"

#include "fib/cuda/input_fills.h"
#include "gpu_memory.h"

#include <fmt/format.h>

#include <cstring>

namespace fib::bench::detail {

namespace cu = fib::cuda;

namespace {

// Output storage with guard regions on the device, poisoned on the worker's stream. Where the
// driver allows, between unmapped address space (gpu_memory.h): the data ends the guard bytes
// (and the rounding to 256 bytes) before the unmapped granule after it.
class DeviceBuffer : public OutputBuffer {
 public:
  DeviceBuffer(DType dtype, const Shape& shape, int device, cudaStream_t stream)
      : OutputBuffer(dtype, shape, FIB_DEVICE_CUDA, device), stream_(stream) {
    constexpr std::size_t kAlign = 256;
    const std::size_t rounded = (bytes() + kAlign - 1) / kAlign * kAlign;
    range_ = GuardedDeviceRange::make(device, rounded + 2 * gpu::kGuardBytes);
    if (range_) {
      auto* end = static_cast<std::byte*>(range_->data()) + range_->size();
      set_data(end - gpu::kGuardBytes - rounded);
      FIB_CUDA_CHECK(cudaMemsetAsync(range_->data(), gpu::kGuardByte, range_->size(), stream));
      return;
    }
    storage_ = device_bytes(bytes() + 2 * gpu::kGuardBytes);
    set_data(static_cast<std::byte*>(storage_.raw()) + gpu::kGuardBytes);
    FIB_CUDA_CHECK(cudaMemsetAsync(storage_.raw(), gpu::kGuardByte, storage_.nbytes(), stream));
  }
  void poison(std::uint64_t k) override {
    const Poison p = poison_for(dtype(), k);
    gpu::launch_fill(data(), bytes(), p.pattern, p.width, stream_);
  }
  gpu::GuardRegion guards() const {
    return {reinterpret_cast<const unsigned char*>(data()) - gpu::kGuardBytes,
            reinterpret_cast<const unsigned char*>(data()) + bytes()};
  }

 private:
  std::unique_ptr<GuardedDeviceRange> range_;  // guard, data, guard; or else
  cu::DeviceTensor storage_;                   // the same in an ordinary allocation
  cudaStream_t stream_;
};

InputViews device_views(const DeviceSet& d, int device) {
  InputViews v;
  for (const auto& [name, t] : d.args.tensors) {
    v.tensors.emplace(name,
                      contiguous_view(t.raw(), t.dtype(), t.shape(), FIB_DEVICE_CUDA, device));
  }
  v.scalars = &d.args.scalars;
  return v;
}

// Destination-passing: the outputs, allocated here. Value-returning: device buffers handed out
// by fib::allocate, reused by position from call to call (so only the first call allocates),
// poisoned ahead of every call on the stream and guarded the same way.
SolutionCall make_call(GpuWorker& g, const Definition& def, const AxisValues& var,
                       CallBackend& backend, bool dps) {
  if (dps && def.outputs.size() > static_cast<std::size_t>(gpu::kMaxGuards)) {
    throw Error("request", fmt::format("the definition has {} outputs; the CUDA worker guards at "
                                       "most {}",
                                       def.outputs.size(), gpu::kMaxGuards));
  }
  const int device = g.device();
  const cudaStream_t stream = g.stream();
  MakeBuffer make = [device, stream](DType dtype, const Shape& shape) {
    return std::make_unique<DeviceBuffer>(dtype, shape, device, stream);
  };
  return SolutionCall(def, var, backend, dps, make, /*poison_ahead=*/true);
}

}  // namespace

// ---- A solution on the device -----------------------------------------------------------------
DeviceSolutionTarget::DeviceSolutionTarget(GpuWorker& g, const Definition& def,
                                           const AxisValues& var,
                                           const std::vector<DeviceSet>& sets, InputSets host,
                                           CallBackend& backend, bool dps)
    : g_(g), sets_(sets), host_(std::move(host)), call_(make_call(g, def, var, backend, dps)) {
  (void)backend.take_launch_error();  // nothing stale from before
}

const std::vector<fib_value>& DeviceSolutionTarget::arguments(int set) {
  auto it = args_.find(set);
  if (it == args_.end()) {
    const DeviceSet& d = sets_.at(static_cast<std::size_t>(set));
    it = args_
             .emplace(set, build_arguments(call_.definition(), device_views(d, g_.device()),
                                           call_.output_views()))
             .first;
  }
  return it->second;
}

void DeviceSolutionTarget::prepare(int set, std::uint64_t call, bool) {
  current_set_ = set;
  call_.begin(call);
}

bool DeviceSolutionTarget::call(std::uint64_t call, Failure* failure) {
  if (auto error = call_.invoke(arguments(current_set_), g_.stream())) {
    *failure = Failure{"error", std::move(*error), call};
    return false;
  }
  return true;
}

// A launch error the solution left unchecked (a bad configuration) is this call's. It is
// recorded by the runtime the solution links, and by fib's own when the solution uses it.
void DeviceSolutionTarget::throw_launch_error() {
  std::optional<LaunchError> launch = call_.backend().take_launch_error();
  if (!launch) {
    const cudaError_t own = cudaGetLastError();
    if (own != cudaSuccess) {
      launch = LaunchError{static_cast<int>(own), cudaGetErrorName(own), cudaGetErrorString(own)};
    }
  }
  if (!launch) return;
  const std::string m =
      fmt::format("a kernel launch of the solution failed: {} ({})", launch->name, launch->text);
  if (cu::is_sticky(launch->code)) throw cu::StickyError(launch->code, m);
  throw cu::CudaError(launch->code, m);
}

// The guarded buffers of the current call: the outputs, or this call's allocations.
std::vector<GuardedBuffer> DeviceSolutionTarget::guarded() const {
  std::vector<GuardedBuffer> list = call_.guarded();
  if (call_.destination_passing()) list.resize(call_.definition().outputs.size());
  return list;
}

bool DeviceSolutionTarget::verify(std::uint64_t call, Failure* failure) {
  throw_launch_error();
  call_.end();
  if (!call_.destination_passing() &&
      call_.allocations() > static_cast<std::size_t>(gpu::kMaxGuards)) {
    *failure = Failure{"error",
                       fmt::format("{} fib::allocate calls in one call; fib guards at most {}",
                                   call_.allocations(), gpu::kMaxGuards),
                       call};
    return false;
  }
  if (auto m = call_.foreign_result()) {
    *failure = Failure{"results", std::move(*m), call};
    return false;
  }
  std::vector<gpu::GuardRegion> regions;
  for (const GuardedBuffer& b : guarded()) {
    // Every buffer of this target is a DeviceBuffer (make_call).
    regions.push_back(static_cast<const DeviceBuffer*>(b.buffer)->guards());
  }
  gpu::launch_check(g_.plan(sets_.at(static_cast<std::size_t>(current_set_)), regions), call, false,
                    g_.stream());
  return true;
}

std::vector<std::pair<std::string, Tensor>> DeviceSolutionTarget::outputs() {
  std::vector<std::pair<std::string, Tensor>> out;
  const Definition& def = call_.definition();
  for (std::size_t o = 0; o < def.outputs.size(); ++o) {
    const ProducedOutput p = call_.produced(o);
    Tensor t(p.dtype, p.shape);
    if (t.nbytes() > 0) {
      FIB_CUDA_CHECK(
          cudaMemcpyAsync(t.raw(), p.data, t.nbytes(), cudaMemcpyDeviceToHost, g_.stream()));
    }
    out.emplace_back(def.outputs[o].name, std::move(t));
  }
  FIB_CUDA_CHECK(cudaStreamSynchronize(g_.stream()));
  return out;
}

void DeviceSolutionTarget::begin_trial() {
  staged_.clear();
  const Definition& def = call_.definition();
  for (std::size_t o = 0; o < def.outputs.size(); ++o) {
    std::uint64_t numel = 1;
    for (auto d : call_.output_shapes()[o]) numel *= static_cast<std::uint64_t>(d);
    const auto bytes = dtype_storage_bytes(def.outputs[o].dtype, numel).value_or(0);
    staged_.push_back(device_bytes(std::max<std::size_t>(static_cast<std::size_t>(bytes), 1)));
  }
}

void DeviceSolutionTarget::stage_checked() {
  staged_meta_.clear();
  const Definition& def = call_.definition();
  for (std::size_t o = 0; o < def.outputs.size(); ++o) {
    const ProducedOutput out = call_.produced(o);
    if (staged_[o].nbytes() < out.bytes) staged_[o] = device_bytes(out.bytes);
    if (out.bytes > 0) {
      FIB_CUDA_CHECK(cudaMemcpyAsync(staged_[o].raw(), out.data, out.bytes,
                                     cudaMemcpyDeviceToDevice, g_.stream()));
    }
    staged_meta_.push_back(
        {def.outputs[o].name, out.dtype, out.shape, staged_[o].raw(), out.bytes});
  }
}

bool DeviceSolutionTarget::settle(Failure* failure) {
  if (auto f = check_failure(g_.take_failure())) {
    *failure = std::move(*f);
    return false;
  }
  return true;
}

// The name of input `index`, and where a file set's copy of it changed: its first changed byte
// against the host copy (the read-only mapping of the input-set file), or against the input made
// again from its fill. A pool set made on the device has no host copy: the input is named, its
// byte not.
std::string DeviceSolutionTarget::modified_input(int index, std::string* where) {
  const auto k_input = static_cast<std::size_t>(index);
  std::string name = "?";
  if (!sets_.empty() && k_input < sets_.front().names.size()) name = sets_.front().names[k_input];
  for (std::size_t k = 0; k < g_.file_sets() && k < host_->size(); ++k) {
    const DeviceSet& d = sets_[k];
    if (k_input >= d.names.size()) continue;
    const std::string& n = d.names[k_input];
    const InputSet& from = host_->at(k);
    Tensor h;
    if (const auto t = from.tensors.find(n); t != from.tensors.end()) {
      h = t->second;
    } else if (const auto f = from.fills.find(n); f != from.fills.end()) {
      h = cu::to_host(cu::make_bulk_fill(f->second, g_.stream()), g_.stream());  // made again
    } else {
      continue;
    }
    const Tensor now = cu::to_host(d.args.tensors.at(n), g_.stream());
    if (std::memcmp(now.raw(), h.raw(), h.nbytes()) == 0) continue;
    const auto* a = static_cast<const unsigned char*>(now.raw());
    const auto* b = static_cast<const unsigned char*>(h.raw());
    std::size_t byte = 0;
    while (byte < h.nbytes() && a[byte] == b[byte]) ++byte;
    *where = fmt::format(" (byte {} of {} changed", byte, h.nbytes());
    return n;
  }
  return name;
}

// A check failure, as the CPU path words it. After a modified input the sets are uploaded
// again for the next evaluation.
std::optional<Failure> DeviceSolutionTarget::check_failure(const gpu::CheckFailure& f) {
  if (f.kind == gpu::kCheckOk) return std::nullopt;
  if (f.kind == gpu::kCheckGuard) {
    const GuardedBuffer b = call_.guarded_at(static_cast<std::size_t>(f.index));
    const std::int64_t offset =
        f.offset < 0 ? f.offset : static_cast<std::int64_t>(b.buffer->bytes()) + f.offset;
    return Failure{"guard", guard_message(b, offset), f.call};
  }
  std::string where;
  const std::string name = modified_input(f.index, &where);
  g_.mark_sets_dirty();
  return Failure{"input_modified",
                 fmt::format("the solution modified its input '{}'{}; inputs are read-only)", name,
                             where.empty() ? " (in a timing set made on the device" : where),
                 f.call};
}

// ---- The CUDA reference ----------------------------------------------------------------------
DeviceReferenceTarget::DeviceReferenceTarget(GpuWorker& g, const Definition& def,
                                             const AxisValues& var,
                                             const std::vector<DeviceSet>& sets,
                                             std::vector<std::uint64_t> seeds)
    : g_(g), def_(def), var_(var), sets_(sets), seeds_(std::move(seeds)) {
  if (seeds_.size() < sets_.size()) {
    throw Error("request.seeds",
                fmt::format("{} seeds for {} input sets", seeds_.size(), sets_.size()));
  }
}

bool DeviceReferenceTarget::call(std::uint64_t, Failure*) {
  const auto k = static_cast<std::size_t>(current_set_);
  last_ = reference_cuda::run(def_, var_, sets_.at(k).args, g_.stream(), seeds_.at(k));
  return true;
}

std::vector<std::pair<std::string, Tensor>> DeviceReferenceTarget::outputs() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& spec : def_.outputs) {
    out.emplace_back(spec.name, cu::to_host(last_.at(spec.name), g_.stream()));
  }
  return out;
}

std::vector<DeviceOutputRef> DeviceReferenceTarget::staged() const {
  std::vector<DeviceOutputRef> outs;
  for (const auto& spec : def_.outputs) {
    const cu::DeviceTensor& t = staged_.at(spec.name);
    outs.push_back({spec.name, t.dtype(), t.shape(), t.raw(), t.nbytes()});
  }
  return outs;
}

bool DeviceReferenceTarget::settle(Failure*) {
  FIB_CUDA_CHECK(cudaStreamSynchronize(g_.stream()));
  return true;
}

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
