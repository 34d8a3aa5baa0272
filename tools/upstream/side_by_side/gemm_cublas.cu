// gemm_n4096_k4096 (C = A @ B.T, float16, float32 accumulation) through cuBLAS, written as
// upstream FlashInfer-Bench writes CUDA solutions: tvm-ffi binding, destination-passing, launched
// on tvm-ffi's environment stream, with "cublas" among its dependencies. Both harnesses run it in
// tools/upstream/upstream-side-by-side.sh beside upstream's example kernel: a library kernel of
// a few microseconds at small M, where the harnesses' timers are compared most closely.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

// One handle per thread and device, made on first use (handle creation is not per-call work).
cublasHandle_t handle_for(int device) {
  thread_local cublasHandle_t handles[64] = {};
  if (device < 0 || device >= 64) TVM_FFI_THROW(ValueError) << "device " << device;
  if (handles[device] == nullptr && cublasCreate(&handles[device]) != CUBLAS_STATUS_SUCCESS) {
    TVM_FFI_THROW(RuntimeError) << "cublasCreate failed";
  }
  return handles[device];
}

void gemm(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  TVM_FFI_ICHECK_EQ(B.size(1), K) << "B must be N x K";
  TVM_FFI_ICHECK(C.size(0) == M && C.size(1) == N) << "C must be M x N";
  if (M == 0) return;
  const DLDevice dev = A.device();
  cublasHandle_t handle = handle_for(dev.device_id);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(dev.device_type, dev.device_id));
  if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS) {
    TVM_FFI_THROW(RuntimeError) << "cublasSetStream failed";
  }
  // Row-major C (M x N) is column-major C^T (N x M) = B^T' x A', where B and A read as
  // column-major are K x N and K x M.
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st =
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                   static_cast<int>(K), &alpha, B.data_ptr(), CUDA_R_16F, static_cast<int>(K),
                   A.data_ptr(), CUDA_R_16F, static_cast<int>(K), &beta, C.data_ptr(), CUDA_R_16F,
                   static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) TVM_FFI_THROW(RuntimeError) << "cublasGemmEx: " << int(st);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm, gemm);
