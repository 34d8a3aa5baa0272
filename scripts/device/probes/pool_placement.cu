// Is it the flush buffer's placement that shifts a memory-bound median? A pool of 16 input
// buffers (32 MiB each, cycled per sample, as fib run's device pool) is fixed; the 200 MiB flush
// buffer is reallocated 12 times with random padding in between. Then the reverse: flush fixed,
// the pool reallocated. docs/benchmarks.md, "Ninth session".
//   nvcc -O3 -arch=native -o /tmp/pool_placement scripts/device/probes/pool_placement.cu
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>
__global__ void readsum(const float4* __restrict__ p, size_t n, float* out) {
  float acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.f) *out = acc;
}
__global__ void flush(float4* p, size_t n) {
  float acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = make_float4(1, 2, 3, 4);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 v = p[i];
    acc += v.x;
  }
  if (acc == 12345.f) p[0].y = acc;
}
int sms;
float* out;
cudaEvent_t e0, e1;
const size_t kData = 32ull << 20, kFlush = 200ull << 20;
float median_of(std::vector<float4*>& pool, float4* fl) {
  std::vector<float> t;
  for (int it = 0; it < 93; ++it) {
    flush<<<sms * 4, 512>>>(fl, kFlush / 16);
    cudaEventRecord(e0);
    readsum<<<sms * 4, 512>>>(pool[it % pool.size()], kData / 16, out);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (it >= 3) t.push_back(ms * 1000);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
void report(const char* what, std::vector<float> m) {
  std::sort(m.begin(), m.end());
  printf("%s: medians %.2f .. %.2f us, spread %.2f%%\n", what, m.front(), m.back(),
         100 * (m.back() - m.front()) / m[m.size() / 2]);
}
int main() {
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaMalloc(&out, 4);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::mt19937 rng(5);
  auto make_pool = [&] {
    std::vector<float4*> pool(16);
    for (auto& p : pool) {
      cudaMalloc(&p, kData);
      cudaMemset(p, 0, kData);
    }
    return pool;
  };
  std::vector<float4*> pool = make_pool();
  std::vector<void*> pads;
  std::vector<float> m;
  for (int f = 0; f < 12; ++f) {
    void* pad;
    cudaMalloc(&pad, ((rng() % 64) + 1) << 20);
    pads.push_back(pad);
    float4* fl;
    cudaMalloc(&fl, kFlush);
    float a = median_of(pool, fl), b = median_of(pool, fl);
    printf("flush placement %2d: %.2f us, again %.2f us\n", f, a, b);
    m.push_back(a);
    cudaFree(fl);
  }
  report("flush reallocated, pool fixed", m);
  float4* fl;
  cudaMalloc(&fl, kFlush);
  m.clear();
  for (int q = 0; q < 12; ++q) {
    for (auto p : pool) cudaFree(p);
    void* pad;
    cudaMalloc(&pad, ((rng() % 64) + 1) << 20);
    pads.push_back(pad);
    pool = make_pool();
    float a = median_of(pool, fl), b = median_of(pool, fl);
    printf("pool placement %2d: %.2f us, again %.2f us\n", q, a, b);
    m.push_back(a);
  }
  report("pool reallocated, flush fixed", m);
  return 0;
}
