// hadamard (hadamard_transform) on the GPU: one thread per output element, the whole signed sum
// out[r, i] = SCALE * sum_j (-1)^popcount(i & j) x[r, j] in fp32 (dim^2 operations a row: cheap
// at NSA's dim 128, and no shared-memory limit on the width), rounded once. A different summation
// order than the CPU's butterflies: the results agree within fp32 rounding before the rounding to
// bf16.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "reference_cuda/device_math.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

__global__ void hadamard_rows(const void* x, void* out, std::int64_t rows, std::int64_t d,
                              float scale, Code x_t, Code out_t) {
  const std::int64_t n = rows * d;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / d, c = i % d;
    float acc = 0.0f;
    for (std::int64_t j = 0; j < d; ++j) {
      const float v = device::load_float(x, r * d + j, x_t);
      acc += (__popcll(static_cast<unsigned long long>(c & j)) & 1) ? -v : v;
    }
    device::store_float(out, i, out_t, acc * scale);
  }
}

class Hadamard final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:hadamard"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("hadamard", def, why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const std::int64_t rows = axis(ctx, "num_tokens"), d = axis(ctx, "dim");
    if (d <= 0 || (d & (d - 1)) != 0) {
      throw Error(ctx.definition.name, "dim is not a power of two",
                  "the Sylvester Hadamard matrix exists for powers of two only");
    }
    const auto scale = static_cast<float>(reference_constant(ctx.definition, {"SCALE", "scale"}));
    const DeviceTensor& x = args.tensor("x");
    DeviceTensor out = make_output(ctx, "output");
    if (rows * d > 0) {
      const std::int64_t blocks = std::min<std::int64_t>((rows * d + 255) / 256, 65535);
      hadamard_rows<<<static_cast<unsigned>(blocks), 256, 0, ctx.stream>>>(
          x.raw(), out.raw(), rows, d, scale, device::code(x.dtype()), device::code(out.dtype()));
      FIB_CUDA_CHECK_LAUNCH();
    }
    DeviceOutputs o;
    o.emplace("output", std::move(out));
    return o;
  }
};

}  // namespace

void add_hadamard(KernelList& list) { list.push_back(std::make_unique<Hadamard>()); }

}  // namespace fib::reference_cuda::detail
