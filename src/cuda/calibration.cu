// Kernels of known cost for checking timers (include/fib/cuda/calibration.h).
#include <cuda_runtime.h>

#include "fib/cuda/calibration.h"

namespace {

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace

extern "C" __global__ void fib_calib_sleep(unsigned long long nanoseconds) {
  const unsigned long long start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) {
  }
}

extern "C" __global__ void fib_calib_empty() {}

extern "C" __global__ void fib_calib_read(const int4* data, long long n, int* sink) {
  int acc = 0;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int4 v = data[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7e57ab1e) *sink = acc;
}

namespace fib::cuda::calibration {

void launch_sleep(cudaStream_t stream, std::uint64_t nanoseconds) {
  fib_calib_sleep<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(nanoseconds));
  FIB_CUDA_CHECK_LAUNCH();
}

void launch_empty(cudaStream_t stream) {
  fib_calib_empty<<<1, 1, 0, stream>>>();
  FIB_CUDA_CHECK_LAUNCH();
}

void launch_read(cudaStream_t stream, const void* data, std::size_t bytes, void* sink,
                 int sm_count) {
  const auto n = static_cast<long long>(bytes / sizeof(int4));
  const unsigned blocks = static_cast<unsigned>(sm_count > 0 ? sm_count * 4 : 128);
  fib_calib_read<<<blocks, 512, 0, stream>>>(static_cast<const int4*>(data), n,
                                             static_cast<int*>(sink));
  FIB_CUDA_CHECK_LAUNCH();
}

}  // namespace fib::cuda::calibration
