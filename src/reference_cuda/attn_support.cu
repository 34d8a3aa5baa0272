// Scratch memory, fills and the bad-input flag of the attention and recurrent-state CUDA
// references (see attn_support.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <vector>

#include "reference_cuda/attn_support.h"
#include "reference_cuda/device_math.cuh"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

__global__ void fill_float_kernel(void* base, std::int64_t n, Code dtype, float value,
                                  const int* flag) {
  if (flag != nullptr && *flag == 0) return;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    device::store_float(base, i, dtype, value);
  }
}

__global__ void fill_int_kernel(void* base, std::int64_t n, Code dtype, std::int64_t value,
                                const int* flag) {
  if (flag != nullptr && *flag == 0) return;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    switch (static_cast<DType>(dtype)) {
      case DType::kInt64:
        static_cast<std::int64_t*>(base)[i] = value;
        break;
      case DType::kInt32:
        static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(value);
        break;
      case DType::kInt16:
        static_cast<std::int16_t*>(base)[i] = static_cast<std::int16_t>(value);
        break;
      case DType::kInt8:
        static_cast<std::int8_t*>(base)[i] = static_cast<std::int8_t>(value);
        break;
      default:
        break;
    }
  }
}

unsigned fill_blocks(std::int64_t n) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(n, 256), 1, 4096));
}

bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
}

}  // namespace

StreamScratch::StreamScratch(std::size_t bytes, cudaStream_t stream)
    : data_(scratch_alloc(bytes, stream)), stream_(stream) {}

StreamScratch::~StreamScratch() {
  if (data_ != nullptr) (void)cudaFreeAsync(data_, stream_);
}

BadInputFlag::BadInputFlag(cudaStream_t stream) : scratch_(sizeof(int), stream), stream_(stream) {
  FIB_CUDA_CHECK(cudaMemsetAsync(scratch_.as<int>(), 0, sizeof(int), stream));
}

void BadInputFlag::poison_if_set(std::initializer_list<const DeviceTensor*> outputs) const {
  for (const DeviceTensor* t : outputs) {
    if (t == nullptr || t->numel() == 0) continue;
    if (is_float(t->dtype())) {
      fill_float_kernel<<<fill_blocks(t->numel()), 256, 0, stream_>>>(
          t->raw(), t->numel(), device::code(t->dtype()), std::numeric_limits<float>::quiet_NaN(),
          get());
    } else {
      fill_int_kernel<<<fill_blocks(t->numel()), 256, 0, stream_>>>(
          t->raw(), t->numel(), device::code(t->dtype()), -2, get());
    }
    FIB_CUDA_CHECK_LAUNCH();
  }
}

int sm_count() {
  static std::mutex mu;
  static std::vector<int> counts;
  int dev = 0;
  FIB_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (static_cast<std::size_t>(dev) >= counts.size())
    counts.resize(static_cast<std::size_t>(dev) + 1, 0);
  int& c = counts[static_cast<std::size_t>(dev)];
  if (c == 0) FIB_CUDA_CHECK(cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev));
  return c;
}

}  // namespace fib::reference_cuda::detail
