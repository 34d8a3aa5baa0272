// embedding on the GPU: the ids are checked on the host first (a few bytes a token; an id
// outside the vocabulary is the CPU reference's error), then one thread per output element
// copies its row's element, converted where the output's dtype differs from the table's.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "reference_cuda/device_math.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

__global__ void gather_rows(const void* ids, const void* weight, void* out, std::int64_t tokens,
                            std::int64_t h, Code ids_t, Code weight_t, Code out_t) {
  const std::int64_t n = tokens * h;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = device::load_index(ids, i / h, ids_t);
    device::store_float(out, i, out_t, device::load_float(weight, row * h + i % h, weight_t));
  }
}

class Embedding final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:embedding"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("embedding", def, why);
  }
  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const std::int64_t tokens = axis(ctx, "num_tokens"), vocab = axis(ctx, "vocab_size"),
                       h = axis(ctx, "hidden_size");
    const DeviceTensor& ids = args.tensor("input_ids");
    const DeviceTensor& weight = args.tensor("weight");
    const Tensor host_ids = ::fib::cuda::to_host(ids, ctx.stream);
    for (std::int64_t t = 0; t < tokens; ++t) {
      const auto id = static_cast<std::int64_t>(host_ids.get(t));
      if (id < 0 || id >= vocab) {
        throw Error(ctx.definition.name,
                    "input_ids[" + std::to_string(t) + "] = " + std::to_string(id) +
                        " is outside the vocabulary [0, " + std::to_string(vocab) + ")",
                    "every token id must name a row of weight");
      }
    }
    DeviceTensor out = make_output(ctx, "output");
    if (tokens * h > 0) {
      const std::int64_t blocks = std::min<std::int64_t>((tokens * h + 255) / 256, 65535);
      gather_rows<<<static_cast<unsigned>(blocks), 256, 0, ctx.stream>>>(
          ids.raw(), weight.raw(), out.raw(), tokens, h, device::code(ids.dtype()),
          device::code(weight.dtype()), device::code(out.dtype()));
      FIB_CUDA_CHECK_LAUNCH();
    }
    DeviceOutputs o;
    o.emplace("output", std::move(out));
    return o;
  }
};

}  // namespace

void add_embedding(KernelList& list) { list.push_back(std::make_unique<Embedding>()); }

}  // namespace fib::reference_cuda::detail
