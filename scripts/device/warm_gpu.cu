// Keeps the GPU busy with device-memory copies for the given seconds (default 25), so that a
// measurement that follows starts on a GPU in the state later ones find it in: measure.sh's
// first `fib run` otherwise starts on a GPU idle since the build, and its memory-bound medians
// stood apart from the later runs' (docs/benchmarks.md, "fib run on a GPU").
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void copy(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 25.0;
  const size_t bytes = size_t{512} << 20;
  void *a = nullptr, *b = nullptr;
  int sms = 0;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
    std::fprintf(stderr, "warm_gpu: no usable CUDA device\n");
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  long copies = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    for (int i = 0; i < 50; ++i) {
      copy<<<sms * 8, 256>>>(static_cast<const uint4*>(a), static_cast<uint4*>(b), bytes / 16);
    }
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::fprintf(stderr, "warm_gpu: %s\n", cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
    copies += 50;
  }
  std::printf("warm_gpu: %ld copies of 512 MiB in %.0f s\n", copies, seconds);
  return 0;
}
