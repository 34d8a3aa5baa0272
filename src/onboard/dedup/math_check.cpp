// The twin guard of deduplication: two definitions of one interface whose reference texts differ
// run through fib's native CPU references on the same small seeded inputs; their outputs say
// whether the texts describe the same math (a different spelling, a folded constant) or not
// (NeoX vs GPT-J RoPE pairs, another clamp limit).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "fib/onboard/dedup.h"
#include "fib/reference/reference.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/workload_synth.h"

namespace fib::onboard {

namespace {

constexpr std::uint64_t kSeed = 0x5eed0f1b;
// Inputs above this (bytes) are made at smaller MoE / GEMM sizes; above kGiveUp even then, the
// math is not compared (onboarding must stay quick).
constexpr std::uint64_t kShrinkAbove = 8ull << 20;
constexpr std::uint64_t kGiveUp = 96ull << 20;

std::uint64_t input_bytes(const Definition& def, const Workload& w) {
  const auto bound = def.bind_axes(w.axes);
  if (!bound) return 0;
  std::uint64_t total = 0;
  for (const auto& t : def.inputs) {
    if (t.is_scalar()) continue;
    const auto shape = def.concrete_shape(t, *bound);
    if (!shape) continue;
    std::uint64_t n = 1;
    for (auto d : *shape) n *= static_cast<std::uint64_t>(std::max<std::int64_t>(d, 0));
    total += dtype_storage_bytes(t.dtype, n).value_or(0);
  }
  return total;
}

std::optional<std::int64_t> const_axis(const Definition& d, const std::string& name) {
  const Axis* a = d.axis(name);
  return a && a->kind == AxisKind::kConst ? a->value : std::nullopt;
}

// Smaller const sizes for the families whose real sizes are large (GEMM weights, MoE experts);
// the native kernels read sizes from the axes, so both definitions shrink alike. Empty when the
// family has no rule.
std::map<std::string, std::int64_t> shrunk_axes(const Definition& d) {
  std::map<std::string, std::int64_t> out;
  if (d.op_type == "gemm") {
    std::int64_t n = const_axis(d, "N").value_or(0), k = const_axis(d, "K").value_or(0);
    while (n * k > (1ll << 18)) {
      if (n >= k && n % 2 == 0)
        n /= 2;
      else if (k % 2 == 0)
        k /= 2;
      else
        break;
    }
    if (n > 0 && k > 0) out = {{"N", n}, {"K", k}};
  } else if (d.op_type == "moe" && const_axis(d, "hidden_size") &&
             const_axis(d, "intermediate_size")) {
    // Expert counts, top_k and routing groups keep their values: the routing stays the real one.
    // Block-scaled definitions keep whole 128-wide blocks.
    const bool blocks = d.axis("num_hidden_blocks") != nullptr;
    const std::int64_t h = blocks ? 128 : 64, i = blocks ? 128 : 32;
    out = {{"hidden_size", h}, {"intermediate_size", i}};
    if (d.axis("gemm1_out_size")) out["gemm1_out_size"] = 2 * i;
    if (blocks) {
      out["num_hidden_blocks"] = h / 128;
      if (d.axis("num_intermediate_blocks")) out["num_intermediate_blocks"] = i / 128;
      if (d.axis("num_gemm1_out_blocks")) out["num_gemm1_out_blocks"] = 2 * i / 128;
    }
  }
  return out;
}

Definition with_axes(Definition d, const std::map<std::string, std::int64_t>& values) {
  for (auto& a : d.axes) {
    auto it = values.find(a.name);
    if (it != values.end() && a.kind == AxisKind::kConst) a.value = it->second;
  }
  return d;
}

// About one unit in the last place of the output dtype: outputs of one math through one native
// kernel agree bit for bit; a tiny constant difference (an eps) may move a rounding by one step.
double rtol_for(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return 0x1p-7;
    case DType::kFloat16:
      return 0x1p-10;
    case DType::kFloat32:
      return 0x1p-20;
    case DType::kFloat8E4M3FN:
      return 0x1p-3;
    case DType::kFloat8E5M2:
      return 0x1p-2;
    default:
      return dtype_is_float(t) ? 0x1p-7 : 0.0;
  }
}

// The workload with its page pool cut to the pages its sequences use (nullopt when it has no
// pool or no spare pages).
std::optional<Workload> without_spare_pages(const Workload& w) {
  std::int64_t* pool = nullptr;
  std::optional<std::int64_t> used;
  Workload lean = w;
  for (auto& [name, value] : lean.axes) {
    if (name == "num_pages") pool = &value;
    if (name == "num_kv_indices") used = value;
  }
  if (!pool || !used || *used + 1 >= *pool) return std::nullopt;
  *pool = std::max<std::int64_t>(*used, 1) + 1;
  return lean;
}

std::string axes_text(const AxisValues& axes) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : axes) parts.push_back(fmt::format("{}={}", name, value));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string_view math_verdict_name(MathVerdict v) {
  switch (v) {
    case MathVerdict::kSame:
      return "same_outputs";
    case MathVerdict::kDifferent:
      return "different_outputs";
    case MathVerdict::kNotCompared:
      return "not_compared";
  }
  return "?";
}

namespace {

MathComparison compare_uncached(const Definition& a, const Definition& b) {
  MathComparison r;
  std::string difference;
  if (!same_kernel(a, b, &difference)) {
    r.detail = "the interfaces differ (" + difference + ")";
    return r;
  }
  std::string why;
  if (!reference::find_kernel(a, &why)) {
    r.detail = fmt::format("no native reference runs '{}': {}", a.name, why);
    return r;
  }
  if (!reference::find_kernel(b, &why)) {
    r.detail = fmt::format("no native reference runs '{}': {}", b.name, why);
    return r;
  }
  try {
    SynthOptions so;
    so.preset = WorkloadPreset::kMixed;
    so.count = 1;
    so.seed = kSeed;
    // Sampling rows span the vocabulary (up to 262k); two rows say as much as more.
    so.max_tokens = a.op_type == "sampling" ? 2 : 4;
    so.max_kv_len = 64;
    Definition da = a, db = b;
    Workload w = synthesize_workloads(da, so).at(0);
    std::string sizes;
    if (input_bytes(da, w) > kShrinkAbove) {
      const auto axes = shrunk_axes(da);
      if (axes.empty()) {
        // No size rule for the family (state pools, MTP buffers): one sequence, one token.
        so.max_tokens = 1;
        so.max_kv_len = 16;
        w = synthesize_workloads(da, so).at(0);
      } else {
        da = with_axes(da, axes);
        db = with_axes(db, axes);
        w = synthesize_workloads(da, so).at(0);
        sizes =
            fmt::format(" at reduced sizes ({})", axes_text(AxisValues(axes.begin(), axes.end())));
      }
    }
    if (const auto bytes = input_bytes(da, w); bytes > kGiveUp) {
      r.detail = fmt::format("its inputs need {} MiB even at the smallest workload", bytes >> 20);
      return r;
    }
    MaterializeOptions mo;
    mo.seed = kSeed;
    // Workload synthesis sizes paged caches as a serving pool (16 spare pages and more); the
    // pages the batch uses are enough here and far quicker to fill. Kept only when the inputs
    // can be made that way.
    std::optional<MaterializedInputs> small;
    if (auto lean = without_spare_pages(w)) {
      try {
        small = materialize_inputs(da, *lean, mo);
        w = *lean;
      } catch (const std::exception&) {
        small.reset();
      }
    }
    MaterializedInputs in = small ? std::move(*small) : materialize_inputs(da, w, mo);

    reference::Arguments args;
    args.tensors = std::move(in.tensors);
    args.scalars = std::move(in.scalars);
    const reference::Outputs oa = reference::run(da, w.axes, args, 0, kSeed);
    const reference::Outputs ob = reference::run(db, w.axes, args, 0, kSeed);
    r.detail = axes_text(w.axes) + sizes;
    std::string worst_output, first_failing;
    for (const auto& spec : da.outputs) {
      const Tensor& x = oa.at(spec.name);
      const Tensor& y = ob.at(spec.name);
      const double rtol = rtol_for(spec.dtype);
      const double atol = dtype_is_float(spec.dtype) ? 1e-6 : 0.0;
      bool ok = true;
      double worst = 0;
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        const double u = x.get(i), v = y.get(i);
        double d = 0;
        if (std::isnan(u) || std::isnan(v)) {
          d = std::isnan(u) == std::isnan(v) ? 0 : std::numeric_limits<double>::infinity();
        } else if (std::isinf(u) || std::isinf(v)) {
          d = u == v ? 0 : std::numeric_limits<double>::infinity();
        } else {
          d = std::fabs(u - v);
        }
        if (d > atol + rtol * std::max(std::fabs(u), std::fabs(v)) || std::isinf(d)) ok = false;
        worst = std::max(worst, d);
      }
      if (worst > r.max_abs_diff || worst_output.empty()) {
        r.max_abs_diff = std::max(r.max_abs_diff, worst);
        worst_output = spec.name;
      }
      if (!ok && first_failing.empty()) first_failing = spec.name;
    }
    r.verdict = first_failing.empty() ? MathVerdict::kSame : MathVerdict::kDifferent;
    r.output = first_failing.empty() ? worst_output : first_failing;
  } catch (const std::exception& e) {
    r = MathComparison{};
    r.detail = fmt::format("the native references could not run: {}", e.what());
  }
  return r;
}

}  // namespace

MathComparison compare_math(const Definition& a, const Definition& b) {
  // What the native kernels read: the interface, the name (some pick a variant by a name token)
  // and the reference text (constants, the RoPE pairing). The result depends on nothing else, so
  // a process keeps it (onboarding several models into one dataset compares the same pairs).
  static std::mutex mutex;
  static std::map<std::string, MathComparison> cache;
  const std::string key =
      fmt::format("{}\n{}\n{}\n--\n{}\n{}\n{}", a.name, interface_fingerprint(a), a.reference,
                  b.name, interface_fingerprint(b), b.reference);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  MathComparison r = compare_uncached(a, b);
  const std::lock_guard<std::mutex> lock(mutex);
  return cache.emplace(key, std::move(r)).first->second;
}

}  // namespace fib::onboard
