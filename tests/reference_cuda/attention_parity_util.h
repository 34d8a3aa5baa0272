// Helpers for the CUDA attention and recurrent-state reference tests (gqa, mla, dsa, gdn,
// mamba): synthesized inputs that a test may edit before both references run on them, the
// comparison, and a timing of a full-size workload whose float inputs are filled on the device.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "fib/reference/reference.h"
#include "fib/reference_cuda/reference_cuda.h"
#include "fib/tensor/inputs.h"
#include "fib/trace/workload.h"
#include "reference/reference_test_util.h"
#include "reference_cuda/parity_util.h"
#include "support/gpu.h"

namespace fib::testing {

// The var axes of `def` among `values` (definitions of one family differ in which axes are var).
inline AxisValues var_axes_in(const Definition& def,
                              const std::map<std::string, std::int64_t>& values) {
  AxisValues out;
  for (const auto& name : def.var_axes()) {
    auto it = values.find(name);
    if (it != values.end()) out.emplace_back(name, it->second);
  }
  return out;
}

// Inputs synthesized by the family's recipe (what expect_cuda_matches_cpu uses), for a test to
// edit before calling expect_same_outputs.
inline reference::Arguments synthesized_arguments(const Definition& def, const AxisValues& axes,
                                                  std::uint64_t seed) {
  Workload w;
  w.uuid = "parity";
  w.axes = axes;
  MaterializeOptions opts;
  opts.seed = seed;
  MaterializedInputs in = materialize_inputs(def, w, opts);
  return reference::Arguments{in.tensors, in.scalars};
}

inline reference::Outputs run_cuda(const Definition& def, const AxisValues& axes,
                                   const reference::Arguments& args) {
  cuda::Stream stream;
  return reference_cuda::run_on_host_arguments(def, axes, args, stream.get());
}

// Runs the CPU and the CUDA reference on `args` and checks every output within its tolerance
// (per output name, "*" for the rest); returns the CUDA outputs for further checks.
inline reference::Outputs expect_same_outputs(const Definition& def, const AxisValues& axes,
                                              const reference::Arguments& args,
                                              const std::map<std::string, ParityTolerance>& tol,
                                              const std::string& what) {
  const reference::Outputs cpu = reference::run(def, axes, args);
  reference::Outputs gpu = run_cuda(def, axes, args);
  for (const auto& [name, expected] : cpu) {
    auto it = gpu.find(name);
    EXPECT_NE(it, gpu.end()) << def.name << " (" << what << "): CUDA output " << name << " missing";
    if (it == gpu.end()) continue;
    const auto t = tol.count(name)  ? tol.at(name)
                   : tol.count("*") ? tol.at("*")
                                    : ParityTolerance{};
    EXPECT_TRUE(tensors_close(it->second, expected, t.atol, t.rtol))
        << def.name << " (" << what << ") output " << name;
  }
  return gpu;
}

// Every element of `t` is NaN (float) or -2 (integer): the poisoned outputs of inputs the CPU
// reference rejects.
inline ::testing::AssertionResult all_poisoned(const Tensor& t) {
  const bool is_int = t.dtype() == DType::kInt32 || t.dtype() == DType::kInt64;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.get(i);
    if (is_int ? v != -2.0 : !std::isnan(v))
      return ::testing::AssertionFailure() << "element " << i << " is " << v;
  }
  return ::testing::AssertionSuccess();
}

// Times the CUDA reference of `def` on a full-size workload: index tensors and scalars as the
// input recipe makes them (integers only), float inputs filled on the device with one byte
// pattern (the values do not change the work). Returns the seconds of the second of two calls
// (the first loads the module), synchronized.
inline double time_full_size(const Definition& def, const AxisValues& axes, unsigned char fill,
                             std::uint64_t seed = 5) {
  Workload w;
  w.uuid = "timing";
  w.axes = axes;
  MaterializeOptions opts;
  opts.seed = seed;
  opts.integers_only = true;
  MaterializedInputs in = materialize_inputs(def, w, opts);
  cuda::Stream stream;
  reference_cuda::DeviceArguments dargs;
  dargs.scalars = in.scalars;
  const auto bound = def.bind_axes(axes);
  EXPECT_TRUE(bound) << def.name;
  if (!bound) return 0;
  for (const auto& spec : def.inputs) {
    if (spec.is_scalar()) continue;
    if (auto it = in.tensors.find(spec.name); it != in.tensors.end()) {
      dargs.tensors.emplace(spec.name, cuda::to_device(it->second, stream.get()));
      continue;
    }
    if (spec.is_optional()) continue;
    const auto shape = def.concrete_shape(spec, *bound);
    EXPECT_TRUE(shape) << def.name << ": " << spec.name;
    if (!shape) return 0;
    cuda::DeviceTensor t(spec.dtype, *shape);
    cuda::fill_bytes(t, fill, stream.get());
    dargs.tensors.emplace(spec.name, std::move(t));
  }
  double seconds = 0;
  for (int call = 0; call < 2; ++call) {
    stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    reference_cuda::DeviceOutputs out = reference_cuda::run(def, axes, dargs, stream.get());
    stream.synchronize();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::string shape;
  for (const auto& [name, value] : axes) shape += " " + name + "=" + std::to_string(value);
  std::printf("[ timing  ] %s:%s: %.1f ms\n", def.name.c_str(), shape.c_str(), seconds * 1e3);
  // ctest shows a passing test's output nowhere; on the device machine (scripts/device), $OUT is
  // the folder whose files come back, so the timings are kept there too.
  if (const char* out = std::getenv("OUT")) {
    if (std::FILE* f = std::fopen((std::string(out) + "/attention_timings.txt").c_str(), "a")) {
      std::fprintf(f, "%s:%s: %.1f ms\n", def.name.c_str(), shape.c_str(), seconds * 1e3);
      std::fclose(f);
    }
  }
  return seconds;
}

}  // namespace fib::testing
