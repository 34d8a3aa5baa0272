#ifdef FIB_HAVE_CUDA

#include "checked_writer.h"

#include <fmt/format.h>

#include <exception>

#include "fib/cuda/runtime.h"
#include "worker_common.h"

namespace fib::bench::detail {

namespace {

// Outputs past this size are staged in ordinary memory: locking gigabytes of host memory costs
// more than the faster copy saves, and a worker should not hold that much locked.
constexpr std::size_t kMaxPinnedBytes = std::size_t{1} << 30;

std::size_t aligned(std::size_t n) { return (n + 255) & ~std::size_t{255}; }

}  // namespace

CheckedOutputWriter::~CheckedOutputWriter() {
  for (Slot& s : slots_) {
    if (s.write.valid()) s.write.wait();
    if (s.copied != nullptr) cudaEventDestroy(s.copied);
  }
}

void CheckedOutputWriter::wait(Slot& s) {
  if (s.write.valid()) s.write.get();
}

void CheckedOutputWriter::submit(const std::string& path,
                                 const std::vector<DeviceOutputRef>& outputs,
                                 std::vector<std::pair<std::string, Tensor>> host_extra,
                                 cudaStream_t stream) {
  Slot& slot = slots_[next_];
  next_ = (next_ + 1) % 2;
  wait(slot);  // its buffer is free again once the write that used it is done
  std::size_t total = 0;
  for (const DeviceOutputRef& o : outputs) total += aligned(o.bytes);

  std::vector<std::pair<std::string, Tensor>> tensors;
  if (total <= kMaxPinnedBytes) {
    if (slot.capacity < total) {
      slot.host.reset();
      void* p = nullptr;
      FIB_CUDA_CHECK(cudaMallocHost(&p, total));
      slot.host = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p),
                                               [](std::byte* q) { cudaFreeHost(q); });
      slot.capacity = total;
    }
    std::size_t at = 0;
    for (const DeviceOutputRef& o : outputs) {
      if (o.bytes == 0) {  // nothing to copy (and possibly no staging memory at all)
        tensors.emplace_back(o.name, Tensor(o.dtype, o.shape));
        continue;
      }
      std::byte* dst = slot.host.get() + at;
      FIB_CUDA_CHECK(cudaMemcpyAsync(dst, o.data, o.bytes, cudaMemcpyDeviceToHost, stream));
      // A view into the slot: it shares the slot's ownership, so the buffer outlives the write.
      tensors.emplace_back(
          o.name, Tensor::view(o.dtype, o.shape, std::shared_ptr<std::byte[]>(slot.host, dst)));
      at += aligned(o.bytes);
    }
  } else {
    for (const DeviceOutputRef& o : outputs) {
      Tensor t(o.dtype, o.shape);
      if (o.bytes > 0) {
        FIB_CUDA_CHECK(cudaMemcpyAsync(t.raw(), o.data, o.bytes, cudaMemcpyDeviceToHost, stream));
      }
      tensors.emplace_back(o.name, std::move(t));
    }
  }
  for (auto& e : host_extra) tensors.push_back(std::move(e));
  if (slot.copied == nullptr) {
    FIB_CUDA_CHECK(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
  }
  FIB_CUDA_CHECK(cudaEventRecord(slot.copied, stream));
  cudaEvent_t copied = slot.copied;
  const int device = device_;
  slot.write = std::async(std::launch::async, [path, tensors = std::move(tensors), copied, device] {
    FIB_CUDA_CHECK(cudaSetDevice(device));
    FIB_CUDA_CHECK(cudaEventSynchronize(copied));
    write_checked_outputs(path, tensors);
  });
}

void CheckedOutputWriter::finish() {
  std::exception_ptr first;
  for (Slot& s : slots_) {
    try {
      wait(s);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
