// Shared by the core CUDA references (gemm, rope, sampling, moe): stream-ordered scratch memory,
// one cuBLAS handle per (device, stream), fp32-accumulating matrix products through it, and
// element access for every dtype (device_math.cuh covers the float ones).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>

#include "fib/base/diagnostics.h"
#include "fib/cuda/runtime.h"
#include "fib/trace/dtype.h"
#include "reference_cuda/device_math.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

// Device memory for one call's intermediates, allocated and freed in stream order
// (scratch_alloc / cudaFreeAsync on the call's stream): it is released only after the work
// enqueued before the destructor, so run() may return while its kernels still read it.
class Scratch {
 public:
  Scratch() = default;
  Scratch(std::size_t bytes, cudaStream_t stream)
      : data_(scratch_alloc(bytes, stream)), stream_(stream) {}
  ~Scratch() {
    if (data_) (void)cudaFreeAsync(data_, stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Scratch(Scratch&& o) noexcept : data_(std::exchange(o.data_, nullptr)), stream_(o.stream_) {}
  Scratch& operator=(Scratch&& o) noexcept {
    if (this != &o) {
      if (data_) (void)cudaFreeAsync(data_, stream_);
      data_ = std::exchange(o.data_, nullptr);
      stream_ = o.stream_;
    }
    return *this;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// Messages for errors (fmt's headers do not compile under nvcc): the arguments streamed in order.
template <typename... T>
std::string cat(const T&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

inline void check_blas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error("cuBLAS", cat(call, " failed: ", cublasGetStatusName(status), " (",
                            cublasGetStatusString(status), ")"));
}

// The cuBLAS type of a dense float dtype, or false for the others.
inline bool blas_type(DType t, cudaDataType* out) {
  switch (t) {
    case DType::kFloat32:
      *out = CUDA_R_32F;
      return true;
    case DType::kFloat16:
      *out = CUDA_R_16F;
      return true;
    case DType::kBFloat16:
      *out = CUDA_R_16BF;
      return true;
    default:
      return false;
  }
}

// C[m, n] = A[m, k] @ B[n, k]^T, all row-major and dense, accumulated in fp32
// (CUBLAS_COMPUTE_32F) and written once as C's type (alpha 1, beta 0: no second rounding).
// `math`: CUBLAS_PEDANTIC_MATH for fp32 operands (true fp32 products and sums, never TF32, even
// under NVIDIA_TF32_OVERRIDE); CUBLAS_DEFAULT_MATH for 16-bit operands (tensor cores with exact
// products and fp32 accumulation, as torch.matmul does). One handle per (device, stream), created
// on first use and kept for the process (destroying handles at exit could outlive the runtime);
// calls on one handle are serialized, so any thread may call this. Enqueued on `stream`.
inline void gemm_nt(cudaStream_t stream, std::int64_t m, std::int64_t n, std::int64_t k,
                    const void* a, cudaDataType a_type, const void* b, cudaDataType b_type, void* c,
                    cudaDataType c_type, cublasMath_t math) {
  struct Handle {
    cublasHandle_t handle = nullptr;
    std::mutex mutex;
  };
  static std::mutex cache_mutex;
  static auto* cache = new std::map<std::pair<int, cudaStream_t>, std::unique_ptr<Handle>>();
  if (m == 0 || n == 0) return;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
    throw Error("cuBLAS", cat("matrix product ", m, "x", n, "x", k, " exceeds cuBLAS's int sizes"));
  if (k == 0) {
    // An empty sum: C = 0 (cuBLAS may return early without writing C).
    const std::size_t elem = c_type == CUDA_R_32F ? 4 : 2;
    FIB_CUDA_CHECK(cudaMemsetAsync(c, 0, static_cast<std::size_t>(m * n) * elem, stream));
    return;
  }
  int device = 0;
  FIB_CUDA_CHECK(cudaGetDevice(&device));
  Handle* h = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto& slot = (*cache)[{device, stream}];
    if (!slot) {
      auto fresh = std::make_unique<Handle>();
      check_blas(cublasCreate(&fresh->handle), "cublasCreate");
      slot = std::move(fresh);
    }
    h = slot.get();
  }
  std::lock_guard<std::mutex> lock(h->mutex);
  check_blas(cublasSetStream(h->handle, stream), "cublasSetStream");
  check_blas(cublasSetMathMode(h->handle, math), "cublasSetMathMode");
  const float one = 1.0f, zero = 0.0f;
  // Column-major view: C^T [n, m] = (B [n, k]) (A^T [k, m]); row-major X [r, c] is column-major
  // X^T with leading dimension c.
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  check_blas(
      cublasGemmEx(h->handle, CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &one, b, b_type, ki, a, a_type,
                   ki, &zero, c, c_type, ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

// Launch geometry of a grid-stride loop over n elements.
inline unsigned grid_for(std::int64_t n, int threads = 256) {
  const std::int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 16 ? 65535 * 16 : blocks));
}

// Launch geometry of a walk over a rows x cols matrix: blockIdx.y strides over rows, the x blocks
// over chunks of `threads * per_thread` columns. Elementwise kernels over a matrix walk it so
// rather than by a flat index, whose split into (row, column) costs two 64-bit divisions per
// element.
inline dim3 grid_2d(std::int64_t rows, std::int64_t cols, int threads = 256, int per_thread = 1) {
  const std::int64_t chunk = static_cast<std::int64_t>(threads) * per_thread;
  const std::int64_t x =
      std::max<std::int64_t>(1, std::min<std::int64_t>((cols + chunk - 1) / chunk, 4096));
  const std::int64_t y = std::max<std::int64_t>(1, std::min<std::int64_t>(rows, 65535));
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

}  // namespace fib::reference_cuda::detail

namespace fib::reference_cuda::device {

// In a grid_2d walk: this thread's first column (of its `per_thread` consecutive ones) and the
// stride to its next chunk. Rows are blockIdx.y, strided by gridDim.y.
__device__ __forceinline__ std::int64_t grid_2d_col(int per_thread = 1) {
  return (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * per_thread;
}
__device__ __forceinline__ std::int64_t grid_2d_col_stride(int per_thread = 1) {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x * per_thread;
}

// Any dtype as fp32: the float ones through load_float, float4 (e2m1, two per byte, low nibble
// first) by table, integers exactly (up to fp32's rounding of large values).
__device__ __forceinline__ float load_any(const void* base, std::int64_t i, Code dtype) {
  switch (static_cast<DType>(dtype)) {
    case DType::kFloat4E2M1: {
      const std::uint8_t byte = static_cast<const std::uint8_t*>(base)[i >> 1];
      const unsigned nib = (i & 1) ? (byte >> 4) : (byte & 0xF);
      const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
      const float v = mag[nib & 7];
      return (nib & 8) ? -v : v;
    }
    case DType::kInt16:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return static_cast<float>(load_index(base, i, dtype));
    default:
      return load_float(base, i, dtype);
  }
}

// Integer stores (sample indices) into int64 or int32 tensors.
__device__ __forceinline__ void store_index(void* base, std::int64_t i, Code dtype,
                                            std::int64_t v) {
  if (static_cast<DType>(dtype) == DType::kInt32)
    static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(v);
  else
    static_cast<std::int64_t*>(base)[i] = v;
}

}  // namespace fib::reference_cuda::device
