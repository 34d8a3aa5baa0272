// activation on the GPU: one thread per output element, act(gate) * up in fp32 and rounded once
// — the CPU reference's math (src/reference/activation.cpp), with CUDA's expf/erff/tanhf
// (within an ulp or two of the host's: results agree after the rounding to bf16 but for ties).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "reference_cuda/device_math.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

enum class Act : std::uint8_t { kSilu, kGelu, kGeluTanh };

// The same reading as the CPU reference's (which `supports` has asked already).
Act act_of(const Definition& def) {
  const std::string& r = def.reference;
  if (r.find("silu(") != std::string::npos) return Act::kSilu;
  if (r.find("gelu(") != std::string::npos) {
    return r.find("tanh") != std::string::npos ? Act::kGeluTanh : Act::kGelu;
  }
  return Act::kSilu;
}

__global__ void act_and_mul(const void* in, void* out, std::int64_t rows, std::int64_t d, Act act,
                            Code in_t, Code out_t) {
  const std::int64_t n = rows * d;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / d, col = i % d;
    const float g = device::load_float(in, row * 2 * d + col, in_t);
    const float u = device::load_float(in, row * 2 * d + d + col, in_t);
    float a;
    if (act == Act::kGelu) {
      a = 0.5f * g * (1.0f + erff(g * 0.70710678118654752f));
    } else if (act == Act::kGeluTanh) {
      a = 0.5f * g * (1.0f + tanhf(0.79788456080286536f * (g + 0.044715f * g * g * g)));
    } else {
      a = g / (1.0f + expf(-g));
    }
    device::store_float(out, i, out_t, a * u);
  }
}

class Activation final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:activation"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("activation", def, why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const std::int64_t rows = axis(ctx, "num_tokens"), d = axis(ctx, "hidden_div_2");
    const DeviceTensor& in = args.tensor("input");
    DeviceTensor out = make_output(ctx, "output");
    if (rows * d > 0) {
      const std::int64_t blocks = std::min<std::int64_t>((rows * d + 255) / 256, 65535);
      act_and_mul<<<static_cast<unsigned>(blocks), 256, 0, ctx.stream>>>(
          in.raw(), out.raw(), rows, d, act_of(ctx.definition), device::code(in.dtype()),
          device::code(out.dtype()));
      FIB_CUDA_CHECK_LAUNCH();
    }
    DeviceOutputs o;
    o.emplace("output", std::move(out));
    return o;
  }
};

}  // namespace

void add_activation(KernelList& list) { list.push_back(std::make_unique<Activation>()); }

}  // namespace fib::reference_cuda::detail
