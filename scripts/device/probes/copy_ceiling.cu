// The ceiling of a 537 MB device-to-device copy on this GPU (mamba_ssu's new_state moves the
// same bytes): the driver's cudaMemcpyAsync against simple copy kernels, event medians of 20
// calls after a 256 MiB memset. docs/benchmarks.md, "Ninth session".
//   nvcc -O3 -arch=native -o /tmp/copy_ceiling scripts/device/probes/copy_ceiling.cu
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#define CK(x)                                                      \
  do {                                                             \
    cudaError_t e = (x);                                           \
    if (e) {                                                       \
      printf("err %s line %d\n", cudaGetErrorString(e), __LINE__); \
      return 1;                                                    \
    }                                                              \
  } while (0)
__global__ void copy_vec(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, st = (size_t)gridDim.x * blockDim.x;
  for (; i < n; i += st) d[i] = s[i];
}
template <int U>
__global__ void copy_unroll(const uint4* __restrict__ s, uint4* __restrict__ d, size_t n) {
  size_t base = (blockIdx.x * (size_t)blockDim.x) * U + threadIdx.x;
  size_t st = (size_t)gridDim.x * blockDim.x * U;
  for (; base < n; base += st) {
    uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      size_t i = base + u * blockDim.x;
      if (i < n) r[u] = __ldcs(s + i);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      size_t i = base + u * blockDim.x;
      if (i < n) __stcs(d + i, r[u]);
    }
  }
}
int main() {
  const size_t bytes = 256ull * 128 * 64 * 128 * 2;  // 537 MB
  void *a, *b, *fl;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMalloc(&fl, 256 << 20));
  CK(cudaMemset(a, 1, bytes));
  CK(cudaMemset(b, 0, bytes));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  size_t n = bytes / 16;
  auto timeit = [&](const char* name, auto fn) {
    std::vector<float> t;
    for (int it = 0; it < 25; ++it) {
      cudaMemsetAsync(fl, it, 256 << 20);
      cudaEventRecord(e0);
      fn();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (it >= 5) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    float m = t[t.size() / 2];
    printf("%-28s median %.4f ms  (%.0f GB/s read+write)  min %.4f max %.4f\n", name, m,
           2.0 * bytes / m / 1e6, t.front(), t.back());
  };
  timeit("cudaMemcpyAsync D2D", [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice); });
  for (int bps : {2, 4, 8}) {
    char nm[64];
    snprintf(nm, 64, "copy_vec 256thr %d blk/SM", bps);
    timeit(nm, [&] { copy_vec<<<sms * bps, 256>>>((const uint4*)a, (uint4*)b, n); });
  }
  timeit("copy_vec full occupancy",
         [&] { copy_vec<<<sms * 8, 256>>>((const uint4*)a, (uint4*)b, n); });
  timeit("copy_vec one elem/thread",
         [&] { copy_vec<<<(unsigned)(n / 256), 256>>>((const uint4*)a, (uint4*)b, n); });
  timeit("copy_unroll<4> 8blk/SM",
         [&] { copy_unroll<4><<<sms * 8, 256>>>((const uint4*)a, (uint4*)b, n); });
  timeit("copy_unroll<8> 4blk/SM",
         [&] { copy_unroll<8><<<sms * 4, 256>>>((const uint4*)a, (uint4*)b, n); });
  timeit("copy_unroll<8> 8blk/SM",
         [&] { copy_unroll<8><<<sms * 8, 256>>>((const uint4*)a, (uint4*)b, n); });
  CK(cudaGetLastError());
  return 0;
}
