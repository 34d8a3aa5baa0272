// Internal to the attention and recurrent-state CUDA references (GQA, MLA, DSA, GDN, Mamba):
// stream-ordered scratch memory, output fills, and the "bad input" flag.
//
// The CPU references throw fib::Error on inputs they reject (an index outside the cache, an
// indptr that decreases, a state slot outside the pool). A CUDA reference cannot throw about
// device data without synchronizing, so these kernels check the same conditions on the device,
// never read or write out of bounds because of them, raise a flag in scratch memory, and a last
// kernel then poisons every output: NaN in float outputs, -2 (an index no reference produces)
// in integer outputs. Conditions that the host can see (shapes, counts) still throw.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <initializer_list>

#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

// Device memory for one call, allocated and freed in stream order (scratch_alloc /
// cudaFreeAsync on the call's stream), so kernels enqueued before the object goes may still
// use it and no synchronization is needed.
class StreamScratch {
 public:
  StreamScratch(std::size_t bytes, cudaStream_t stream);
  ~StreamScratch();
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// The bad-input flag: one device int, zeroed on creation.
class BadInputFlag {
 public:
  explicit BadInputFlag(cudaStream_t stream);
  int* get() const { return scratch_.as<int>(); }
  // Fills every listed output with NaN (float dtypes) or -2 (integer dtypes) when the flag is
  // set; enqueued on the stream, reads the flag on the device.
  void poison_if_set(std::initializer_list<const DeviceTensor*> outputs) const;

 private:
  StreamScratch scratch_;
  cudaStream_t stream_;
};

// Streaming multiprocessors of the current device (cached per device).
int sm_count();

// ceil(a / b) for positive b.
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace fib::reference_cuda::detail
