// CUDA reference parity: the CUDA kernel and the CPU reference on the same synthesized inputs
// (structure-aware, from the tensor module), compared element by element.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fib/reference/reference.h"
#include "fib/reference_cuda/reference_cuda.h"
#include "fib/tensor/inputs.h"
#include "fib/trace/workload.h"
#include "reference/reference_test_util.h"
#include "support/gpu.h"

namespace fib::testing {

struct ParityTolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

// Synthesizes inputs for `def` at `var_axes` (seeded), runs both references and checks every
// output within the tolerance (per output name; "*" for the rest). Returns the CUDA kernel id.
inline std::string expect_cuda_matches_cpu(const Definition& def, const AxisValues& var_axes,
                                           std::uint64_t seed,
                                           const std::map<std::string, ParityTolerance>& tol) {
  Workload w;  // no inputs listed: every one is synthesized by the family's recipe
  w.uuid = "parity";
  w.axes = var_axes;
  MaterializeOptions opts;
  opts.seed = seed;
  MaterializedInputs in = materialize_inputs(def, w, opts);
  reference::Arguments args{in.tensors, in.scalars};
  reference::Outputs cpu = reference::run(def, var_axes, args, 0, seed);
  cuda::Stream stream;
  reference::Outputs gpu =
      reference_cuda::run_on_host_arguments(def, var_axes, args, stream.get(), seed);
  for (const auto& [name, expected] : cpu) {
    auto it = gpu.find(name);
    EXPECT_NE(it, gpu.end()) << def.name << ": CUDA output " << name << " missing";
    if (it == gpu.end()) continue;
    auto t = tol.count(name) ? tol.at(name) : tol.count("*") ? tol.at("*") : ParityTolerance{};
    EXPECT_TRUE(tensors_close(it->second, expected, t.atol, t.rtol))
        << def.name << " output " << name;
  }
  std::string why;
  const auto* k = reference_cuda::find_kernel(def, &why);
  return k ? std::string(k->id()) : why;
}

}  // namespace fib::testing
