// Helpers for the CUDA attention and recurrent-state reference tests (gqa, mla, dsa, gdn,
// mamba): synthesized inputs that a test may edit before both references run on them, the
// comparison, a timing of a full-size workload whose float inputs are filled on the device, and
// the check of a full-size workload's outputs (whole, or on sampled rows where the CPU reference
// would take minutes).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

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

// Checks every CPU output has a CUDA output within its tolerance (per output name, "*" for the
// rest).
inline void expect_outputs_close(const Definition& def, const reference::Outputs& gpu,
                                 const reference::Outputs& cpu,
                                 const std::map<std::string, ParityTolerance>& tol,
                                 const std::string& what) {
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
}

// Runs the CPU and the CUDA reference on `args` and checks every output within its tolerance
// (per output name, "*" for the rest); returns the CUDA outputs for further checks.
inline reference::Outputs expect_same_outputs(const Definition& def, const AxisValues& axes,
                                              const reference::Arguments& args,
                                              const std::map<std::string, ParityTolerance>& tol,
                                              const std::string& what) {
  const reference::Outputs cpu = reference::run(def, axes, args);
  reference::Outputs gpu = run_cuda(def, axes, args);
  expect_outputs_close(def, gpu, cpu, tol, what);
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

// No output of a full-size call is poisoned or undefined: no float element is NaN or +inf (-inf
// is the lse of a row that sees no key), no integer element below -1 (-1 pads a top-k row, -2
// poisons one).
inline void expect_no_poison(const reference::Outputs& outputs, const std::string& what) {
  for (const auto& [name, t] : outputs) {
    const bool is_int = t.dtype() == DType::kInt32 || t.dtype() == DType::kInt64;
    std::int64_t bad = 0, first = -1;
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const double v = t.get(i);
      if (is_int ? v < -1.0 : std::isnan(v) || v == std::numeric_limits<double>::infinity()) {
        if (first < 0) first = i;
        ++bad;
      }
    }
    EXPECT_EQ(bad, 0) << what << " output " << name << ": first at flat index " << first;
  }
}

// The rows `rows` (of dimension 0, in that order) of every tensor among `tensors` whose spec in
// `specs` has `row_axis` as its first dimension; the others unchanged.
inline std::map<std::string, Tensor, std::less<>> cut_rows(
    const std::vector<TensorSpec>& specs, const std::map<std::string, Tensor, std::less<>>& tensors,
    const std::string& row_axis, const std::vector<std::int64_t>& rows) {
  std::map<std::string, Tensor, std::less<>> out = tensors;
  for (const auto& spec : specs) {
    auto it = out.find(spec.name);
    if (spec.is_scalar() || spec.shape->empty() || spec.shape->front() != row_axis ||
        it == out.end())
      continue;
    const Tensor& whole = it->second;
    const std::size_t row_bytes = whole.nbytes() / static_cast<std::size_t>(whole.dim(0));
    Shape shape = whole.shape();
    shape[0] = static_cast<std::int64_t>(rows.size());
    Tensor cut(whole.dtype(), shape);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      EXPECT_LT(rows[i], whole.dim(0)) << spec.name;
      std::memcpy(cut.bytes().data() + i * row_bytes,
                  whole.bytes().data() + static_cast<std::size_t>(rows[i]) * row_bytes, row_bytes);
    }
    it->second = std::move(cut);
  }
  return out;
}

// A full-size shape checked on a sample of its rows: the CUDA reference ran on the whole shape
// (`gpu`, its outputs for `args`); the CPU reference, which would take minutes there, runs on
// the rows `rows` of `row_axis` alone (every input and output whose first dimension is that axis
// cut to them; caches and the like whole), whose outputs must be the CUDA outputs' same rows
// within the tolerance. Valid where a row's outputs depend on that row's inputs and the shared
// tensors only (a token of sparse attention, a batch row of the top-k indexer); the caller
// rewrites what else the sample changes (`sample_args`, e.g. a single sequence's qo_indptr).
// Returns the CPU outputs of the sample.
inline reference::Outputs expect_rows_match_cpu(
    const Definition& def, const AxisValues& axes, const reference::Arguments& args,
    const reference::Outputs& gpu, const std::string& row_axis,
    const std::vector<std::int64_t>& rows, const std::map<std::string, ParityTolerance>& tol,
    const std::function<void(reference::Arguments&)>& sample_args = {}) {
  AxisValues sample_axes = axes;
  for (auto& [name, value] : sample_axes)
    if (name == row_axis) value = static_cast<std::int64_t>(rows.size());
  reference::Arguments sample{cut_rows(def.inputs, args.tensors, row_axis, rows), args.scalars};
  if (sample_args) sample_args(sample);
  const reference::Outputs cpu = reference::run(def, sample_axes, sample);
  const reference::Outputs gpu_rows = cut_rows(def.outputs, gpu, row_axis, rows);
  expect_outputs_close(def, gpu_rows, cpu, tol,
                       std::to_string(rows.size()) + " sampled rows of " + row_axis);
  return cpu;
}

// Full-size inputs synthesized by the family's recipe, the CUDA reference's outputs on them, and
// a check that none is poisoned: the start of every full-size output check.
struct FullSizeCall {
  reference::Arguments args;
  reference::Outputs gpu;
};
inline FullSizeCall run_cuda_full_size(const Definition& def, const AxisValues& axes,
                                       std::uint64_t seed) {
  FullSizeCall c{synthesized_arguments(def, axes, seed), {}};
  c.gpu = run_cuda(def, axes, c.args);
  expect_no_poison(c.gpu, def.name);
  return c;
}

// Checks the last `rows` query rows of the outputs `full` of a single-sequence causal prefill
// (on `args`) against the CPU reference. Causal masking is aligned to the end of the keys, so the
// last rows alone against every key are exactly the whole problem's last rows: the sample's
// qo_indptr is {0, rows} and everything on the key side stays whole. The last rows see the most
// keys.
inline void expect_last_query_rows_match(const Definition& def, const AxisValues& axes,
                                         const reference::Arguments& args,
                                         const reference::Outputs& full, std::int64_t rows,
                                         const std::map<std::string, ParityTolerance>& tol) {
  const auto total_q = axis_value(axes, "total_q");
  ASSERT_TRUE(total_q && *total_q >= rows) << def.name;
  ASSERT_EQ(axis_value(axes, "len_indptr").value_or(0), 2) << def.name << ": one sequence";
  std::vector<std::int64_t> last;
  for (std::int64_t r = *total_q - rows; r < *total_q; ++r) last.push_back(r);
  expect_rows_match_cpu(def, axes, args, full, "total_q", last, tol,
                        [&](reference::Arguments& sample) {
                          Tensor qo(sample.tensor("qo_indptr").dtype(), {2});
                          qo.set(0, 0);
                          qo.set(1, static_cast<double>(rows));
                          sample.tensors["qo_indptr"] = qo;
                        });
}

// The same on the CUDA reference's outputs at a full-size shape, on synthesized inputs.
inline void expect_last_query_rows_match_cpu(const Definition& def, const AxisValues& axes,
                                             std::int64_t rows, std::uint64_t seed,
                                             const std::map<std::string, ParityTolerance>& tol) {
  const FullSizeCall c = run_cuda_full_size(def, axes, seed);
  expect_last_query_rows_match(def, axes, c.args, c.gpu, rows, tol);
}

// Checks the CUDA reference of `def` at a full-size shape against the CPU reference on the whole
// shape, on inputs synthesized by the family's recipe (where the CPU reference takes seconds
// there, not minutes).
inline void expect_full_size_matches_cpu(const Definition& def, const AxisValues& axes,
                                         std::uint64_t seed,
                                         const std::map<std::string, ParityTolerance>& tol) {
  const reference::Arguments args = synthesized_arguments(def, axes, seed);
  expect_no_poison(expect_same_outputs(def, axes, args, tol, "full size"), def.name);
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
