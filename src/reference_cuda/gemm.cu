// gemm on the GPU: C[M, N] = A[M, K] @ B[N, K]^T through cuBLAS with fp32 accumulation
// (CUBLAS_COMPUTE_32F), rounded once to C's dtype — the CPU reference's math
// (src/reference/gemm.cpp), which follows torch.matmul on fp16 tensors. fp16/bf16 operands use
// tensor cores (exact products, fp32 sums, as torch.matmul); fp32 operands are multiplied in
// true fp32 (pedantic math: never TF32). When A, B and C share one of those dtypes cuBLAS writes
// C directly; any other combination (mixed dtypes, float8, float4, integers) is converted to
// fp32 first, multiplied in fp32 and rounded once into C. The summation order is cuBLAS's, not
// the CPU's serial one: results agree within fp32 rounding before the final rounding.
#include <cuda_runtime.h>

#include "reference_cuda/core_util.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

__global__ void to_float32(const void* in, Code in_t, float* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    out[i] = device::load_any(in, i, in_t);
  }
}

__global__ void round_from_float32(const float* in, void* out, Code out_t, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    device::store_float(out, i, out_t, in[i]);
  }
}

bool is_float_output(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
}

class Gemm final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:gemm"; }

  bool supports(const Definition& def, std::string* why) const override {
    if (!cpu_supports("gemm", def, why)) return false;
    const TensorSpec* c = def.output("C");
    if (!is_float_output(c->dtype)) {
      if (why) *why = cat("the CUDA gemm writes float outputs, not ", dtype_name(c->dtype));
      return false;
    }
    return true;
  }

  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const std::int64_t m = axis(ctx, "M"), n = axis(ctx, "N"), k = axis(ctx, "K");
    const DeviceTensor& a = args.tensor("A");
    const DeviceTensor& b = args.tensor("B");
    DeviceTensor c = make_output(ctx, "C");
    cudaDataType at{}, bt{}, ct{};
    const bool direct = a.dtype() == b.dtype() && a.dtype() == c.dtype() &&
                        blas_type(a.dtype(), &at) && blas_type(b.dtype(), &bt) &&
                        blas_type(c.dtype(), &ct);
    if (direct) {
      gemm_nt(ctx.stream, m, n, k, a.raw(), at, b.raw(), bt, c.raw(), ct,
              a.dtype() == DType::kFloat32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH);
    } else if (m > 0 && n > 0) {
      // fp32 copies of the operands that are not fp32 already, an fp32 product, one rounding.
      Scratch a32, b32, c32;
      const float* ap = a.data<float>();
      const float* bp = b.data<float>();
      if (a.dtype() != DType::kFloat32) {
        a32 = Scratch(static_cast<std::size_t>(m * k) * sizeof(float), ctx.stream);
        to_float32<<<grid_for(m * k), 256, 0, ctx.stream>>>(a.raw(), device::code(a.dtype()),
                                                            a32.as<float>(), m * k);
        FIB_CUDA_CHECK_LAUNCH();
        ap = a32.as<float>();
      }
      if (b.dtype() != DType::kFloat32) {
        b32 = Scratch(static_cast<std::size_t>(n * k) * sizeof(float), ctx.stream);
        to_float32<<<grid_for(n * k), 256, 0, ctx.stream>>>(b.raw(), device::code(b.dtype()),
                                                            b32.as<float>(), n * k);
        FIB_CUDA_CHECK_LAUNCH();
        bp = b32.as<float>();
      }
      float* cp = c.data<float>();
      if (c.dtype() != DType::kFloat32) {
        c32 = Scratch(static_cast<std::size_t>(m * n) * sizeof(float), ctx.stream);
        cp = c32.as<float>();
      }
      gemm_nt(ctx.stream, m, n, k, ap, CUDA_R_32F, bp, CUDA_R_32F, cp, CUDA_R_32F,
              CUBLAS_PEDANTIC_MATH);
      if (c.dtype() != DType::kFloat32) {
        round_from_float32<<<grid_for(m * n), 256, 0, ctx.stream>>>(cp, c.raw(),
                                                                    device::code(c.dtype()), m * n);
        FIB_CUDA_CHECK_LAUNCH();
      }
    }
    DeviceOutputs o;
    o.emplace("C", std::move(c));
    return o;
  }
};

}  // namespace

// C = A @ B^T through cuBLAS, fp32 sums.
void add_gemm(KernelList& list) { list.push_back(std::make_unique<Gemm>()); }

}  // namespace fib::reference_cuda::detail
