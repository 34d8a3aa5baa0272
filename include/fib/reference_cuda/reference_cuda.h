// CUDA native references: the same math as the CPU references (src/reference), one kernel per
// op family, on device tensors and a stream. Simple and obviously correct first (fp32
// accumulation, cuBLAS with fp32 compute for matrix products), fast enough that a full-size
// corpus workload takes well under a second. They agree with the CPU references within the
// tolerances tests/reference_cuda states per family.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fib/cuda/runtime.h"
#include "fib/reference/reference.h"
#include "fib/trace/constraint.h"
#include "fib/trace/definition.h"

namespace fib::reference_cuda {

using cuda::DeviceTensor;

// The inputs of one call, by name, on the device. Scalars stay on the host.
using DeviceArguments = reference::NamedArguments<DeviceTensor>;

using DeviceOutputs = std::map<std::string, DeviceTensor, std::less<>>;

struct CallContext {
  const Definition& definition;
  AxisValues axes;  // every axis, const and var, bound
  cudaStream_t stream = nullptr;
  std::uint64_t seed = 0;  // sampling kernels: the random stream to draw from
};

// One op family's CUDA reference. run() enqueues work on ctx.stream and returns without
// synchronizing; outputs are allocated by the kernel (cuda::DeviceTensor) with the
// definition's shapes and dtypes. Scratch memory it needs is its own business.
class Kernel {
 public:
  virtual ~Kernel() = default;
  // Stable id, written into traces: "cuda:<family>", e.g. "cuda:gqa_paged.decode".
  virtual std::string_view id() const = 0;
  virtual bool supports(const Definition& def, std::string* why) const = 0;
  virtual DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const = 0;
};

// Every kernel, in lookup order.
const std::vector<std::unique_ptr<Kernel>>& kernels();
// The kernel covering `def`, or nullptr with the reasons.
const Kernel* find_kernel(const Definition& def, std::string* why);

// Runs the CUDA reference of `def` on device arguments: checks every input's dtype and shape
// against the definition first and the outputs' after (fib::Error otherwise); enqueues on
// `stream` without synchronizing.
DeviceOutputs run(const Definition& def, const AxisValues& var_axes, const DeviceArguments& args,
                  cudaStream_t stream, std::uint64_t seed = 0);

// Convenience for tests and `fib reference --device cuda`: copies host arguments to the
// device, runs, synchronizes and copies the outputs back.
reference::Outputs run_on_host_arguments(const Definition& def, const AxisValues& var_axes,
                                         const reference::Arguments& args, cudaStream_t stream,
                                         std::uint64_t seed = 0);

// The exact distribution the CUDA sampler (cuda:sampling) draws from: float32 [batch_size,
// vocab_size], the GPU's counterpart of fib::reference::sampling_distribution
// (fib/reference/sampling.h) with the same rules (top_k, then top_p on the renormalized row,
// p <= 0 a one-hot at the first maximal index, ties by the lower token index, cdf in double
// rounded to float per token, each row finally normalized) and the same summation orders, so it
// equals the CPU's distribution entry for entry. A row the CPU reference rejects (negative, NaN
// or infinite entries, no mass left) comes back as NaN: the device cannot throw, and the work is
// enqueued on `stream` without synchronizing. Throws fib::Error when `def` is not a sampling
// definition or `probs`, `top_k`, `top_p` are missing or misshaped.
DeviceTensor sampling_distribution(const Definition& def, const AxisValues& var_axes,
                                   const DeviceArguments& args, cudaStream_t stream);

}  // namespace fib::reference_cuda
