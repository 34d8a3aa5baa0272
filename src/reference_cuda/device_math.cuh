// Device-side element access for every float dtype of FlashInfer-Trace: loads convert to fp32,
// stores round from fp32 as PyTorch's .to(dtype) does (round to nearest even; float8 through
// the CUDA conversion intrinsics without saturation). Used by every CUDA reference kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "fib/trace/dtype.h"

namespace fib::reference_cuda::device {

// The dtype codes kernels switch on (fib::DType values, passed by value to kernels).
using Code = std::uint8_t;
inline constexpr Code code(DType t) { return static_cast<Code>(t); }

// The shared-memory address of a generic pointer into shared memory, as PTX's .shared operands
// take it.
__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// c (16x8, fp32) += a (16x16, row-major) * b (16x8, column-major) on the tensor cores, for
// bf16 or fp16 operands. Not volatile: they touch only registers, and the compiler may
// interleave independent mmas.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_f16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                        unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float load_float(const void* base, std::int64_t i, Code dtype) {
  switch (static_cast<DType>(dtype)) {
    case DType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DType::kFloat16:
      return __half2float(static_cast<const __half*>(base)[i]);
    case DType::kBFloat16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    case DType::kFloat8E4M3FN: {
      __nv_fp8_e4m3 v;
      v.__x = static_cast<const __nv_fp8_storage_t*>(base)[i];
      return static_cast<float>(v);
    }
    case DType::kFloat8E5M2: {
      __nv_fp8_e5m2 v;
      v.__x = static_cast<const __nv_fp8_storage_t*>(base)[i];
      return static_cast<float>(v);
    }
    case DType::kInt64:
      return static_cast<float>(static_cast<const std::int64_t*>(base)[i]);
    case DType::kInt32:
      return static_cast<float>(static_cast<const std::int32_t*>(base)[i]);
    default:
      return __int_as_float(0x7fc00000);  // NaN: a dtype a float kernel does not read
  }
}

// Rounds v to `dtype`. float8: NaN for values beyond the format's range, as PyTorch's casts
// give (the CUDA intrinsics are asked not to saturate).
__device__ __forceinline__ void store_float(void* base, std::int64_t i, Code dtype, float v) {
  switch (static_cast<DType>(dtype)) {
    case DType::kFloat32:
      static_cast<float*>(base)[i] = v;
      break;
    case DType::kFloat16:
      static_cast<__half*>(base)[i] = __float2half_rn(v);
      break;
    case DType::kBFloat16:
      static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
      break;
    case DType::kFloat8E4M3FN:
      static_cast<__nv_fp8_storage_t*>(base)[i] = __nv_cvt_float_to_fp8(v, __NV_NOSAT, __NV_E4M3);
      break;
    case DType::kFloat8E5M2:
      static_cast<__nv_fp8_storage_t*>(base)[i] = __nv_cvt_float_to_fp8(v, __NV_NOSAT, __NV_E5M2);
      break;
    default:
      break;
  }
}

// Eight 2-byte floats packed in 16 bytes <-> eight fp32 values, for kernels whose element type
// is a template parameter: with the type known at compile time a thread's 16-byte loads form
// straight-line code, so the compiler issues them all before the first use (the dtype switch of
// load_float puts each load in its own branch, to be waited on before the next is issued).
template <class T>
__device__ __forceinline__ void unpack8(const uint4& u, float* o);
template <>
__device__ __forceinline__ void unpack8<__nv_bfloat16>(const uint4& u, float* o) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {  // a bf16 is the high half of the fp32 with the same bits
    o[2 * e] = __uint_as_float(w[e] << 16);
    o[2 * e + 1] = __uint_as_float(w[e] & 0xffff0000u);
  }
}
template <>
__device__ __forceinline__ void unpack8<__half>(const uint4& u, float* o) {
  const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = __half22float2(h[e]);
    o[2 * e] = f.x;
    o[2 * e + 1] = f.y;
  }
}

// Rounds eight fp32 values to T (nearest even, as store_float does) into 16 bytes.
template <class T>
__device__ __forceinline__ uint4 pack8(const float* v);
template <>
__device__ __forceinline__ uint4 pack8<__nv_bfloat16>(const float* v) {
  uint4 u;
  __nv_bfloat162* b = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) b[e] = __floats2bfloat162_rn(v[2 * e], v[2 * e + 1]);
  return u;
}
template <>
__device__ __forceinline__ uint4 pack8<__half>(const float* v) {
  uint4 u;
  __half2* h = reinterpret_cast<__half2*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) h[e] = __floats2half2_rn(v[2 * e], v[2 * e + 1]);
  return u;
}

// Integer loads (indices, lengths, page tables) from int32 or int64 tensors.
__device__ __forceinline__ std::int64_t load_index(const void* base, std::int64_t i, Code dtype) {
  switch (static_cast<DType>(dtype)) {
    case DType::kInt64:
      return static_cast<const std::int64_t*>(base)[i];
    case DType::kInt32:
      return static_cast<const std::int32_t*>(base)[i];
    case DType::kInt16:
      return static_cast<const std::int16_t*>(base)[i];
    case DType::kInt8:
      return static_cast<const std::int8_t*>(base)[i];
    case DType::kUInt8:
    case DType::kBool:
      return static_cast<const std::uint8_t*>(base)[i];
    default:
      return 0;
  }
}

// Block-wide sum of one float per thread (blockDim.x a multiple of 32, at most 1024); every
// thread gets the total. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? scratch[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? scratch[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace fib::reference_cuda::device
