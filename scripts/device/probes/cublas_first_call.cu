// What does cuBLAS's first call at a new M cost? fib run's CUDA GEMM reference spends about
// 64 ms per gemm_n4096_k4096 workload in its first trial's warmup. This times, in one process
// with one handle and stream (as the reference worker has), the first and second
// cublasGemmEx call (fp16 in and out, fp32 compute, as cuda:gemm) at each of the corpus's 43 M
// values, host time around the call and a stream synchronize. docs/benchmarks.md, "Ninth
// session".
//   nvcc -O3 -arch=native -o /tmp/cublas_first_call scripts/device/probes/cublas_first_call.cu \
//     -lcublas
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

int main() {
  const int ms[] = {1,   2,   4,   7,   8,   15,  16,  24,  32,  35,  40,   48,   56,  64,  70,
                    72,  80,  88,  96,  104, 112, 120, 128, 136, 144, 152,  160,  168, 176, 184,
                    192, 200, 208, 216, 224, 232, 240, 248, 256, 972, 2053, 2379, 8192};
  const int n = 4096, k = 4096, max_m = 8192;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cudaMalloc(&a, size_t{max_m} * k * 2);
  cudaMalloc(&b, size_t{n} * k * 2);
  cudaMalloc(&c, size_t{max_m} * n * 2);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  cublasHandle_t h;
  cublasCreate(&h);
  cudaDeviceSynchronize();
  std::printf("cublasCreate: %.1f ms\n",
              std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&](int m) {
    const auto s = Clock::now();
    cublasSetStream(h, stream);
    cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    const cublasStatus_t st =
        cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16F, k, a, CUDA_R_16F, k,
                     &zero, c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cudaStreamSynchronize(stream);
    if (st != CUBLAS_STATUS_SUCCESS) std::printf("cublasGemmEx failed: %d\n", st);
    return std::chrono::duration<double, std::milli>(Clock::now() - s).count();
  };
  double first_total = 0;
  for (int m : ms) {
    const double first = gemm(m), second = gemm(m);
    first_total += first;
    std::printf("M %5d: first call %8.2f ms, second %6.3f ms\n", m, first, second);
  }
  std::printf("first calls: %.1f ms in all\n", first_total);
  return 0;
}
