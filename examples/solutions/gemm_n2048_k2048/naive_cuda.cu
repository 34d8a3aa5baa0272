// naive_cuda: GEMM of gemm_n2048_k2048 (Llama 3.2 1B attn.o_proj) on the GPU, one thread per
// output element.
//
// C[m, n] = sum_k A[m, k] * B[n, k], i.e. C = A @ B.T with B stored like a linear layer's
// weight, [N, K]. float16 in and out; the sum is accumulated in fp32 and rounded once, as the
// reference (torch.matmul on fp16) does. Each thread of a 16x16 block computes one element of
// C with a serial loop over K, reading A and B straight from global memory: no reuse through
// shared memory, no tensor cores, and neighbouring threads read rows of B 4 KiB apart.
// Destination-passing; device pointers, the environment stream.
//
// Expected from `fib run --device cuda:0`: PASSED on every workload (slowly; skipped on
// --device cpu).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

// The stream fib times: tvm-ffi's environment stream for the tensor's device, which the caller
// sets for the call.
cudaStream_t env_stream(const tvm::ffi::TensorView& t) {
  return static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(t.device().device_type, t.device().device_id));
}

bool is_fp16(const tvm::ffi::TensorView& t) {
  const DLDataType dt = t.dtype();
  return dt.code == kDLFloat && dt.bits == 16 && dt.lanes == 1;
}

constexpr int kBlock = 16;

__global__ void gemm_elementwise(const __half* a, const __half* b, __half* c, std::int64_t m_size,
                                 std::int64_t n_size, std::int64_t k_size) {
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  const std::int64_t m = static_cast<std::int64_t>(blockIdx.y) * kBlock + threadIdx.y;
  if (m >= m_size || n >= n_size) return;
  float sum = 0.0f;
  for (std::int64_t k = 0; k < k_size; ++k)
    sum += __half2float(a[m * k_size + k]) * __half2float(b[n * k_size + k]);
  c[m * n_size + n] = __float2half_rn(sum);
}

void gemm(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  if (!is_fp16(a) || !is_fp16(b) || !is_fp16(c)) {
    TVM_FFI_THROW(TypeError) << "naive_cuda gemm expects float16 tensors";
  }
  if (!a.is_contiguous() || !b.is_contiguous() || !c.is_contiguous())
    TVM_FFI_THROW(ValueError) << "naive_cuda gemm expects contiguous tensors";
  const std::int64_t m_size = a.size(0), k_size = a.size(1), n_size = b.size(0);
  if (m_size == 0 || n_size == 0) return;  // a grid of no blocks is a launch error
  const dim3 block(kBlock, kBlock);
  const dim3 grid(static_cast<unsigned>((n_size + kBlock - 1) / kBlock),
                  static_cast<unsigned>((m_size + kBlock - 1) / kBlock));
  gemm_elementwise<<<grid, block, 0, env_stream(a)>>>(
      static_cast<const __half*>(a.data_ptr()), static_cast<const __half*>(b.data_ptr()),
      static_cast<__half*>(c.data_ptr()), m_size, n_size, k_size);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "naive_cuda gemm: launch failed: " << cudaGetErrorString(e);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, gemm);
