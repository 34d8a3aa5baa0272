// caches_results: an RMSNorm of rmsnorm_h2048 that serves repeated calls from a cache.
//
// Broken on purpose: the cheat that inflated an upstream FlashInfer-Bench contest entry 12.9x.
// It keeps a static cache of outputs keyed on a cheap fingerprint of the call (the input's
// shape; hashing the whole input would cost as much as the kernel) and, on a hit, copies the
// cached output instead of computing. Against a harness that times the same inputs over and
// over it looks correct and very fast. fib gives every checked call fresh inputs from a seed
// the solution cannot see, and checked calls look exactly like timed ones, so the cache hands
// back the output of an earlier, different input.
//
// Expected from `fib run`: INCORRECT_NUMERICAL on every workload (the first call computes and
// fills the cache, every later call with the same shape returns a stale output).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

namespace {

float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round to nearest even; NaN stays a quiet NaN.
std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

constexpr float kEps = 1e-5f;

using Fingerprint = std::pair<std::int64_t, std::int64_t>;  // (rows, hidden)
std::map<Fingerprint, std::vector<std::uint16_t>> g_cache;

void rmsnorm(tvm::ffi::TensorView hidden_states, tvm::ffi::TensorView weight,
             tvm::ffi::TensorView output) {
  const std::int64_t rows = hidden_states.size(0);
  const std::int64_t hidden = hidden_states.size(1);
  auto* y = static_cast<std::uint16_t*>(output.data_ptr());
  const Fingerprint key{rows, hidden};
  if (auto it = g_cache.find(key); it != g_cache.end()) {
    for (std::size_t i = 0; i < it->second.size(); ++i) y[i] = it->second[i];
    return;
  }
  const auto* x = static_cast<const std::uint16_t*>(hidden_states.data_ptr());
  const auto* w = static_cast<const std::uint16_t*>(weight.data_ptr());
  for (std::int64_t r = 0; r < rows; ++r) {
    float sum_sq = 0.0f;
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = bf16_to_float(x[r * hidden + c]);
      sum_sq += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + kEps);
    for (std::int64_t c = 0; c < hidden; ++c) {
      const float v = bf16_to_float(x[r * hidden + c]);
      y[r * hidden + c] = float_to_bf16(v * inv_rms * bf16_to_float(w[c]));
    }
  }
  g_cache[key].assign(y, y + rows * hidden);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, rmsnorm);
