// value_returning_cuda: RMSNorm of rmsnorm_h2048 on the GPU, value-returning.
//
// The kernel of `tuned_cuda` (one block per row, 16-byte loads, warp-shuffle reduction), but the
// function returns its output instead of writing into one fib passes: it asks tvm-ffi's
// environment allocator (tvm::ffi::Tensor::FromEnvAlloc with TVMFFIEnvTensorAlloc) for a
// [batch_size, 2048] bfloat16 tensor on the input's device; fib points that allocator at its own
// device memory (poisoned and guarded like a destination-passing output, and the same buffer
// again on the next call), and returns it.
//
// Expected from `fib run --device cuda:0`: PASSED on every workload (skipped on --device cpu).
#include <cuda_bf16.h>
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

bool is_bf16(const tvm::ffi::TensorView& t) {
  const DLDataType dt = t.dtype();
  return dt.code == kDLBfloat && dt.bits == 16 && dt.lanes == 1;
}

constexpr int kHidden = 2048;
constexpr float kEps = 1e-5f;
constexpr int kVec = 8;                   // bfloat16s in one 16-byte load
constexpr int kThreads = kHidden / kVec;  // 256: one vector per thread
constexpr int kWarps = kThreads / 32;

union Vec8 {
  uint4 raw;
  __nv_bfloat162 pair[kVec / 2];
};

__global__ void __launch_bounds__(kThreads)
    rmsnorm_row(const uint4* __restrict__ x, const uint4* __restrict__ w, uint4* __restrict__ y) {
  __shared__ float warp_sums[kWarps];
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  Vec8 xv;
  xv.raw = x[index];
  float v[kVec];
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) {
    const float2 f = __bfloat1622float2(xv.pair[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
    sum_sq += f.x * f.x + f.y * f.y;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum_sq;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) total += warp_sums[i];
  const float inv_rms = rsqrtf(total / static_cast<float>(kHidden) + kEps);

  Vec8 wv;
  wv.raw = w[threadIdx.x];
  Vec8 out;
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) {
    const float2 wf = __bfloat1622float2(wv.pair[i]);
    out.pair[i] = __floats2bfloat162_rn(v[2 * i] * inv_rms * wf.x, v[2 * i + 1] * inv_rms * wf.y);
  }
  y[index] = out.raw;
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

tvm::ffi::Tensor rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight) {
  if (!is_bf16(hidden_states) || !is_bf16(weight)) {
    TVM_FFI_THROW(TypeError) << "value_returning_cuda rmsnorm expects bfloat16 tensors";
  }
  // Device memory from the environment allocator (fib's), on the input's device.
  tvm::ffi::Tensor output = tvm::ffi::Tensor::FromEnvAlloc(
      TVMFFIEnvTensorAlloc, {hidden_states.size(0), hidden_states.size(1)},
      DLDataType{kDLBfloat, 16, 1}, hidden_states.device());
  if (hidden_states.ndim() != 2 || hidden_states.size(1) != kHidden ||
      !hidden_states.is_contiguous() || !output.is_contiguous()) {
    TVM_FFI_THROW(ValueError)
        << "value_returning_cuda rmsnorm expects contiguous [batch_size, 2048] tensors";
  }
  if (!aligned16(hidden_states.data_ptr()) || !aligned16(weight.data_ptr()) ||
      !aligned16(output.data_ptr()))
    TVM_FFI_THROW(ValueError) << "value_returning_cuda rmsnorm expects 16-byte aligned tensors";
  const std::int64_t rows = hidden_states.size(0);
  if (rows == 0) return output;  // a grid of no blocks is a launch error
  rmsnorm_row<<<static_cast<unsigned>(rows), kThreads, 0, env_stream(hidden_states)>>>(
      static_cast<const uint4*>(hidden_states.data_ptr()),
      static_cast<const uint4*>(weight.data_ptr()), static_cast<uint4*>(output.data_ptr()));
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    TVM_FFI_THROW(RuntimeError) << "value_returning_cuda rmsnorm: launch failed: "
                                << cudaGetErrorString(e);
  return output;
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
