// Does where a buffer lands change a memory-bound kernel's time? Medians of one read kernel over
// 16 placements of its buffer (padding allocations of random size in between), each timed twice.
// docs/benchmarks.md, "Ninth session".
//   nvcc -O3 -arch=native -o /tmp/placement scripts/device/probes/placement.cu
//   /tmp/placement MiB seed
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
__global__ void flush(float4* p, size_t n) {  // write then read 200 MiB
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
int main(int argc, char** argv) {
  const size_t bytes = (argc > 1 ? atoll(argv[1]) : 64) << 20;
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float4* fl;
  cudaMalloc(&fl, 200 << 20);
  float* out;
  cudaMalloc(&out, 4);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::mt19937 rng(argc > 2 ? atoi(argv[2]) : 1);
  std::vector<void*> pads;
  auto median_of = [&](float4* buf) {
    std::vector<float> t;
    for (int it = 0; it < 63; ++it) {
      flush<<<sms * 4, 512>>>(fl, (200 << 20) / 16);
      cudaEventRecord(e0);
      readsum<<<sms * 4, 512>>>(buf, bytes / 16, out);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (it >= 3) t.push_back(ms * 1000);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  std::vector<float> meds;
  for (int p = 0; p < 16; ++p) {
    void* pad;
    size_t pb = ((rng() % 64) + 1) << 20;
    cudaMalloc(&pad, pb);
    pads.push_back(pad);
    float4* buf;
    cudaMalloc(&buf, bytes);
    cudaMemset(buf, 0, bytes);
    float m1 = median_of(buf), m2 = median_of(buf);
    printf("placement %2d (pad %3zu MiB, va %p): %.2f us, again %.2f us\n", p, pb >> 20, (void*)buf,
           m1, m2);
    meds.push_back(m1);
    cudaFree(buf);
  }
  std::sort(meds.begin(), meds.end());
  printf("%zu MiB read: medians over placements %.2f .. %.2f us (spread %.2f%%)\n", bytes >> 20,
         meds.front(), meds.back(), 100 * (meds.back() - meds.front()) / meds[meds.size() / 2]);
  return 0;
}
