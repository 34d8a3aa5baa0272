// concat_mla (concat_mla_absorb_q) on the GPU: one thread per element of q, copied from q_nope
// or q_pe (converted where the dtypes differ) — the CPU reference's copy
// (src/reference/concat_mla.cpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "reference_cuda/device_math.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

__global__ void concat_rows(const void* nope, const void* pe, void* q, std::int64_t rows,
                            std::int64_t a, std::int64_t b, Code nope_t, Code pe_t, Code q_t) {
  const std::int64_t w = a + b, n = rows * w;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / w, c = i % w;
    const float v = c < a ? device::load_float(nope, r * a + c, nope_t)
                          : device::load_float(pe, r * b + c - a, pe_t);
    device::store_float(q, i, q_t, v);
  }
}

class ConcatMlaQ final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:concat_mla"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("concat_mla", def, why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const std::int64_t rows = axis(ctx, "num_tokens") * axis(ctx, "num_heads");
    const std::int64_t a = axis(ctx, "ckv_dim"), b = axis(ctx, "kpe_dim");
    if (axis(ctx, "q_dim") != a + b) {
      throw Error(ctx.definition.name, "q_dim is not ckv_dim + kpe_dim",
                  "the query is the two parts side by side");
    }
    const DeviceTensor& nope = args.tensor("q_nope");
    const DeviceTensor& pe = args.tensor("q_pe");
    DeviceTensor q = make_output(ctx, "q");
    if (rows * (a + b) > 0) {
      const std::int64_t blocks = std::min<std::int64_t>((rows * (a + b) + 255) / 256, 65535);
      concat_rows<<<static_cast<unsigned>(blocks), 256, 0, ctx.stream>>>(
          nope.raw(), pe.raw(), q.raw(), rows, a, b, device::code(nope.dtype()),
          device::code(pe.dtype()), device::code(q.dtype()));
      FIB_CUDA_CHECK_LAUNCH();
    }
    DeviceOutputs o;
    o.emplace("q", std::move(q));
    return o;
  }
};

}  // namespace

void add_concat_mla(KernelList& list) { list.push_back(std::make_unique<ConcatMlaQ>()); }

}  // namespace fib::reference_cuda::detail
