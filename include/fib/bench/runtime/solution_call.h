// One solution under test, called again and again: its output buffers (destination-passing) or
// the buffers fib::allocate hands out (value-returning), poisoned before every call and guarded,
// the arguments of each call, the call through a CallBackend, and what the call produced. The
// same for host and device memory: an OutputBuffer says where its bytes live and how it is
// poisoned; the checks of guards and inputs stay with the target that owns the memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fib/bench/runtime/call_arguments.h"
#include "fib/bench/runtime/call_backend.h"

namespace fib::bench::detail {

// Output storage (with guard regions around it, kept by the derived class) in host or device
// memory.
class OutputBuffer {
 public:
  OutputBuffer(DType dtype, Shape shape, std::int32_t device_type, std::int32_t device_id);
  virtual ~OutputBuffer() = default;
  OutputBuffer(const OutputBuffer&) = delete;
  OutputBuffer& operator=(const OutputBuffer&) = delete;

  // Fills the data with the poison of call `k` (poison_for).
  virtual void poison(std::uint64_t k) = 0;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::size_t bytes() const { return bytes_; }
  std::byte* data() const { return data_; }
  fib_tensor view() const;

 protected:
  void set_data(std::byte* data) { data_ = data; }

 private:
  DType dtype_;
  Shape shape_;
  std::size_t bytes_ = 0;
  std::int32_t device_type_, device_id_;
  std::byte* data_ = nullptr;
};

// Makes a fresh guarded buffer (throws on allocation failure).
using MakeBuffer = std::function<std::unique_ptr<OutputBuffer>(DType, const Shape&)>;

// fib::allocate's callback. Buffers are reused by position from call to call when the request
// matches (so addresses repeat and only the first call allocates) and poisoned for every call:
// at allocation, or ahead of the call (begin_call) where poisoning is queued work that should
// stay outside a timed window.
class ValueAllocator {
 public:
  ValueAllocator(MakeBuffer make, bool poison_ahead);
  ValueAllocator(const ValueAllocator&) = delete;
  ValueAllocator& operator=(const ValueAllocator&) = delete;

  const fib_allocator* abi() const { return &abi_; }
  // Before call `k`: nothing handed out yet (ahead-poisoning: the last call's buffers poisoned).
  void begin_call(std::uint64_t k);
  // After the call: how many it used is remembered for the next begin_call.
  void end_call() { used_last_call_ = used_; }
  // The buffers handed out during the current call, in order.
  std::size_t used() const { return used_; }
  // Every buffer handed out so far (those of the current call first).
  std::size_t size() const { return buffers_.size(); }
  const OutputBuffer& buffer(std::size_t i) const { return *buffers_.at(i); }

 private:
  static int thunk(void* self, std::int32_t dtype, const std::int64_t* shape, std::int32_t ndim,
                   fib_tensor* out);
  int allocate(std::int32_t dtype, const std::int64_t* shape, std::int32_t ndim, fib_tensor* out);

  MakeBuffer make_;
  bool poison_ahead_;
  std::vector<std::unique_ptr<OutputBuffer>> buffers_;
  std::size_t used_ = 0, used_last_call_ = 0;
  std::uint64_t call_ = 0;
  fib_allocator abi_{};
};

// Output o of the last call: where its bytes are, and its dtype and shape as produced.
struct ProducedOutput {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;
  std::size_t bytes = 0;
};

// A guarded buffer of the current call and how a message names it ("output 'y'",
// "allocation #2").
struct GuardedBuffer {
  std::string name;
  const OutputBuffer* buffer;
};

// "the solution wrote past the end of output 'y' (byte 4096 of a 4096-byte buffer)": `offset`
// is the first corrupted byte relative to the start of the data (negative: before it).
std::string guard_message(const GuardedBuffer& g, std::int64_t offset);

// The buffers a solution writes into during a call (never the inputs), the call itself and the
// results, for one definition and binding of its axes.
class SolutionCall {
 public:
  // `backend` outlives this. Outputs of destination-passing solutions are made with `make` here.
  SolutionCall(const Definition& def, const AxisValues& var, CallBackend& backend, bool dps,
               const MakeBuffer& make, bool poison_ahead);

  const Definition& definition() const { return def_; }
  bool destination_passing() const { return dps_; }
  CallBackend& backend() { return backend_; }
  // The shape of every output, from the workload's axes.
  const std::vector<Shape>& output_shapes() const { return output_shapes_; }
  // Destination-passing: the outputs' views, the tail of every call's arguments (else empty).
  std::vector<fib_tensor> output_views() const;

  // Before call `k`: the outputs poisoned (and allocations, per the allocator's policy).
  void begin(std::uint64_t k);
  // Makes the call with `args` (build_arguments over output_views()); the solution's error.
  std::optional<std::string> invoke(const std::vector<fib_value>& args, void* stream);
  // After the call: value-returning, the first result that fib::allocate did not hand out during
  // this call, as a message.
  std::optional<std::string> foreign_result() const;
  void end() { allocator_.end_call(); }

  // The outputs, then this call's allocations: what a check of guards covers.
  std::vector<GuardedBuffer> guarded() const;
  // Guarded buffer `i` in that order, also among allocations an earlier call made beyond the
  // current call's (a check that reports on an earlier call names its buffer).
  GuardedBuffer guarded_at(std::size_t i) const;
  std::size_t allocations() const { return allocator_.used(); }
  ProducedOutput produced(std::size_t o) const;
  // The poison sentinels of the call begun last (poison_sentinels).
  const std::map<std::string, std::int64_t>& sentinels() const { return sentinels_; }

 private:
  const Definition& def_;
  CallBackend& backend_;
  bool dps_;
  std::vector<Shape> output_shapes_;
  std::vector<std::unique_ptr<OutputBuffer>> outputs_;
  ValueAllocator allocator_;
  std::vector<fib_tensor> results_;
  std::map<std::string, std::int64_t> sentinels_;
};

}  // namespace fib::bench::detail
