// Writes a trial's checked outputs to their file off the worker's critical path: the device
// copy goes to page-locked host memory on the worker's stream (a fraction of a pageable copy's
// time), and a writer thread waits for that copy and writes the safetensors file while the GPU
// runs the next trial. Before the worker replies it waits for every write (finish()), so the
// orchestrator never reads a file that is not complete.
#pragma once

#ifdef FIB_HAVE_CUDA

#include <cuda_runtime.h>

#include <cstddef>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fib/tensor/tensor.h"

namespace fib::bench::detail {

// One output of a checked call, still on the device.
struct DeviceOutputRef {
  std::string name;
  DType dtype;
  Shape shape;
  const void* data;
  std::size_t bytes;
};

class CheckedOutputWriter {
 public:
  explicit CheckedOutputWriter(int device) : device_(device) {}
  ~CheckedOutputWriter();
  CheckedOutputWriter(const CheckedOutputWriter&) = delete;
  CheckedOutputWriter& operator=(const CheckedOutputWriter&) = delete;

  // Queues the copy of `outputs` on `stream` and returns; the file at `path` holds them, then
  // `host_extra` (tensors already on the host), once finish() returns. Waits first for the
  // write that last used the same staging slot (two slots: one trial's write overlaps the next).
  void submit(const std::string& path, const std::vector<DeviceOutputRef>& outputs,
              std::vector<std::pair<std::string, Tensor>> host_extra, cudaStream_t stream);
  // Waits for every queued write; rethrows the first write's error (fib::Error, CUDA errors).
  void finish();

 private:
  struct Slot {
    std::shared_ptr<std::byte[]> host;  // page-locked (cudaMallocHost), grown as needed
    std::size_t capacity = 0;
    cudaEvent_t copied = nullptr;
    std::future<void> write;
  };
  void wait(Slot& s);

  int device_;
  Slot slots_[2];
  int next_ = 0;
};

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
