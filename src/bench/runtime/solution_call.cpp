// A solution called again and again (fib/bench/runtime/solution_call.h).
#include "fib/bench/runtime/solution_call.h"

#include <fmt/format.h>

#include "fib/base/diagnostics.h"

namespace fib::bench::detail {

namespace {

std::size_t storage_bytes(DType dtype, const Shape& shape) {
  std::uint64_t numel = 1;
  for (auto d : shape) numel *= static_cast<std::uint64_t>(d);
  return static_cast<std::size_t>(dtype_storage_bytes(dtype, numel).value_or(0));
}

}  // namespace

OutputBuffer::OutputBuffer(DType dtype, Shape shape, std::int32_t device_type,
                           std::int32_t device_id)
    : dtype_(dtype),
      shape_(std::move(shape)),
      bytes_(storage_bytes(dtype_, shape_)),
      device_type_(device_type),
      device_id_(device_id) {}

fib_tensor OutputBuffer::view() const {
  return contiguous_view(data_, dtype_, shape_, device_type_, device_id_);
}

ValueAllocator::ValueAllocator(MakeBuffer make, bool poison_ahead)
    : make_(std::move(make)), poison_ahead_(poison_ahead) {
  abi_.context = this;
  abi_.allocate = &ValueAllocator::thunk;
}

void ValueAllocator::begin_call(std::uint64_t k) {
  call_ = k;
  if (poison_ahead_) {
    // The buffers the last call was given come back, in order, to this one: poisoned now.
    for (std::size_t i = 0; i < used_last_call_ && i < buffers_.size(); ++i) buffers_[i]->poison(k);
  }
  used_ = 0;
}

int ValueAllocator::thunk(void* self, std::int32_t dtype, const std::int64_t* shape,
                          std::int32_t ndim, fib_tensor* out) {
  return static_cast<ValueAllocator*>(self)->allocate(dtype, shape, ndim, out);
}

int ValueAllocator::allocate(std::int32_t dtype, const std::int64_t* shape, std::int32_t ndim,
                             fib_tensor* out) {
  if (dtype < 0 || dtype > FIB_DTYPE_BOOL || ndim < 0 || ndim > FIB_MAX_RANK) return 1;
  Shape s(shape, shape + ndim);
  for (auto d : s) {
    if (d < 0) return 1;
  }
  const auto dt = static_cast<DType>(dtype);
  try {
    bool fresh = false;
    if (used_ >= buffers_.size() || buffers_[used_]->dtype() != dt ||
        buffers_[used_]->shape() != s) {
      // New (the first call, or a different request at this position).
      auto b = make_(dt, s);
      if (used_ < buffers_.size()) {
        buffers_[used_] = std::move(b);
      } else {
        buffers_.push_back(std::move(b));
      }
      fresh = true;
    }
    OutputBuffer& b = *buffers_[used_];
    if (fresh || !poison_ahead_) b.poison(call_);
    *out = b.view();
  } catch (const std::exception&) {
    return 1;  // the solution's fib::allocate throws std::bad_alloc
  }
  ++used_;
  return 0;
}

std::string guard_message(const GuardedBuffer& g, std::int64_t offset) {
  if (offset < 0) {
    return fmt::format("the solution wrote before the start of {} ({} bytes before it)", g.name,
                       -offset);
  }
  return fmt::format("the solution wrote past the end of {} (byte {} of a {}-byte buffer)", g.name,
                     offset, g.buffer->bytes());
}

SolutionCall::SolutionCall(const Definition& def, const AxisValues& var, CallBackend& backend,
                           bool dps, const MakeBuffer& make, bool poison_ahead)
    : def_(def),
      backend_(backend),
      dps_(dps),
      allocator_(make, poison_ahead),
      results_(def.outputs.size() + 1) {
  const auto bound = def.bind_axes(var);
  if (!bound) throw Error("request", "the workload does not bind every var axis");
  for (const auto& spec : def.outputs) {
    const auto shape = def.concrete_shape(spec, *bound);
    if (!shape) throw Error("request", fmt::format("cannot size output '{}'", spec.name));
    output_shapes_.push_back(*shape);
    if (dps_) outputs_.push_back(make(spec.dtype, *shape));
  }
}

std::vector<fib_tensor> SolutionCall::output_views() const {
  std::vector<fib_tensor> views;
  for (const auto& o : outputs_) views.push_back(o->view());
  return views;
}

void SolutionCall::begin(std::uint64_t k) {
  for (auto& o : outputs_) o->poison(k);
  allocator_.begin_call(k);
  sentinels_ = poison_sentinels(def_, k);
}

std::optional<std::string> SolutionCall::invoke(const std::vector<fib_value>& args, void* stream) {
  CallFrame frame;
  frame.args = &args;
  frame.destination_passing = dps_;
  frame.results = &results_;
  frame.allocator = allocator_.abi();
  frame.stream = stream;
  return backend_.call(frame);
}

std::optional<std::string> SolutionCall::foreign_result() const {
  if (dps_) return std::nullopt;
  for (std::size_t o = 0; o < def_.outputs.size(); ++o) {
    bool ours = false;
    for (std::size_t k = 0; k < allocator_.used(); ++k) {
      ours |= results_[o].data == allocator_.buffer(k).data();
    }
    if (!ours) {
      return fmt::format(
          "output '{}' (result #{}) was not allocated with fib::allocate during this call",
          def_.outputs[o].name, o + 1);
    }
  }
  return std::nullopt;
}

std::vector<GuardedBuffer> SolutionCall::guarded() const {
  std::vector<GuardedBuffer> list;
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    list.push_back({fmt::format("output '{}'", def_.outputs[i].name), outputs_[i].get()});
  }
  for (std::size_t k = 0; k < allocator_.used(); ++k) {
    list.push_back({fmt::format("allocation #{}", k + 1), &allocator_.buffer(k)});
  }
  return list;
}

GuardedBuffer SolutionCall::guarded_at(std::size_t i) const {
  if (i < outputs_.size()) {
    return {fmt::format("output '{}'", def_.outputs[i].name), outputs_[i].get()};
  }
  const std::size_t k = i - outputs_.size();
  return {fmt::format("allocation #{}", k + 1), &allocator_.buffer(k)};
}

ProducedOutput SolutionCall::produced(std::size_t o) const {
  if (dps_) {
    const OutputBuffer& b = *outputs_[o];
    return {b.data(), b.dtype(), b.shape(), b.bytes()};
  }
  const fib_tensor& r = results_[o];
  Shape shape(r.shape, r.shape + r.ndim);
  const auto dtype = static_cast<DType>(r.dtype);
  const std::size_t bytes = storage_bytes(dtype, shape);
  return {r.data, dtype, std::move(shape), bytes};
}

}  // namespace fib::bench::detail
