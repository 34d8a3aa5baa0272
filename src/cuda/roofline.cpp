// Achieved rates against the device's peaks (include/fib/cuda/roofline.h).
#include "fib/cuda/roofline.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace fib::cuda {

std::string_view math_kind_name(MathKind kind) {
  switch (kind) {
    case MathKind::kBf16Tensor:
      return "bf16";
    case MathKind::kFp16Tensor:
      return "fp16";
    case MathKind::kFp8Tensor:
      return "fp8";
    case MathKind::kTf32Tensor:
      return "tf32";
    case MathKind::kFp32:
      return "fp32";
  }
  return "unknown";
}

std::optional<double> DevicePeaks::flops_per_second(MathKind kind) const {
  double v = 0;
  switch (kind) {
    case MathKind::kBf16Tensor:
      v = bf16;
      break;
    case MathKind::kFp16Tensor:
      v = fp16;
      break;
    case MathKind::kFp8Tensor:
      v = fp8;
      break;
    case MathKind::kTf32Tensor:
      v = tf32;
      break;
    case MathKind::kFp32:
      v = fp32;
      break;
  }
  if (v <= 0) return std::nullopt;
  return v;
}

DevicePeaks device_peaks(std::string_view name, double peak_dram_bytes_per_second) {
  DevicePeaks p;
  p.dram_bytes_per_second = peak_dram_bytes_per_second;
  auto has = [&](std::string_view s) { return name.find(s) != std::string_view::npos; };
  // NVIDIA's H100/H200 SXM datasheets, dense (no sparsity): the H200 has the H100 SXM's compute
  // and only more, faster memory. The H100 SXM reports itself as "H100 80GB HBM3" (the PCIe part
  // as "H100 PCIe", the NVL part as "H100 NVL"; both have lower peaks).
  const bool h100_sxm = has("H100") && (has("HBM3") || has("SXM")) && !has("NVL") && !has("PCIe");
  const bool h200_sxm = has("H200") && !has("NVL");
  if (h100_sxm || h200_sxm) {
    p.key = h100_sxm ? "h100_sxm" : "h200_sxm";
    p.bf16 = 989.4e12;
    p.fp16 = 989.4e12;
    p.fp8 = 1978.9e12;
    p.tf32 = 494.7e12;
    p.fp32 = 66.9e12;
  }
  return p;
}

Roofline roofline(const RooflineInput& in, const DevicePeaks& peaks) {
  Roofline r;
  if (in.median_ms <= 0) return r;
  const double seconds = in.median_ms * 1e-3;
  std::optional<double> memory_floor, compute_floor;
  std::vector<std::string> too_fast;
  if (in.bytes && *in.bytes > 0) {
    r.bytes_per_second = *in.bytes / seconds;
    if (peaks.dram_bytes_per_second > 0) {
      r.bandwidth_fraction = *r.bytes_per_second / peaks.dram_bytes_per_second;
      memory_floor = *in.bytes / peaks.dram_bytes_per_second * 1e3;
      if (*r.bandwidth_fraction > kImplausibleFactor) {
        too_fast.push_back(fmt::format("{:.1f} GB/s is {:.2f}x the peak DRAM bandwidth",
                                       *r.bytes_per_second * 1e-9, *r.bandwidth_fraction));
      }
    }
  }
  if (in.flops && *in.flops > 0) {
    r.flops_per_second = *in.flops / seconds;
    if (auto peak = peaks.flops_per_second(in.math)) {
      r.flops_fraction = *r.flops_per_second / *peak;
      compute_floor = *in.flops / *peak * 1e3;
      if (*r.flops_fraction > kImplausibleFactor) {
        too_fast.push_back(fmt::format("{:.1f} TFLOP/s is {:.2f}x the peak {} rate",
                                       *r.flops_per_second * 1e-12, *r.flops_fraction,
                                       math_kind_name(in.math)));
      }
    }
  }
  if (memory_floor || compute_floor) {
    const double m = memory_floor.value_or(0), c = compute_floor.value_or(0);
    r.floor_ms = std::max(m, c);
    r.bound = m >= c ? "memory" : "compute";
    r.share = *r.floor_ms / in.median_ms;
  }
  if (!too_fast.empty()) {
    r.plausible = false;
    r.note =
        std::string(kImplausibleNote) + " (" + fmt::format("{}", fmt::join(too_fast, "; ")) + ")";
  }
  return r;
}

Json to_json(const Roofline& r) {
  Json j = Json::object();
  if (r.bytes_per_second) j["bytes_per_second"] = *r.bytes_per_second;
  if (r.bandwidth_fraction) j["bandwidth_fraction"] = *r.bandwidth_fraction;
  if (r.flops_per_second) j["flops_per_second"] = *r.flops_per_second;
  if (r.flops_fraction) j["flops_fraction"] = *r.flops_fraction;
  if (r.floor_ms) j["floor_ms"] = *r.floor_ms;
  if (!r.bound.empty()) j["bound"] = r.bound;
  if (r.share) j["share"] = *r.share;
  j["plausible"] = r.plausible;
  if (!r.note.empty()) j["note"] = r.note;
  return j;
}

std::string roofline_line(const Roofline& r, double median_ms) {
  if (!r.share || !r.floor_ms) return {};
  std::string rates;
  if (r.bandwidth_fraction)
    rates += fmt::format("; {:.0f} GB/s, {:.1f}% of peak DRAM bandwidth",
                         *r.bytes_per_second * 1e-9, 100 * *r.bandwidth_fraction);
  if (r.flops_fraction)
    rates += fmt::format("; {:.1f} TFLOP/s, {:.1f}% of peak", *r.flops_per_second * 1e-12,
                         100 * *r.flops_fraction);
  return fmt::format(
      "at {:.1f}% of the roofline ({}-bound: {:.4g} ms at the device's peaks, took "
      "{:.4g} ms{})",
      100 * *r.share, r.bound, *r.floor_ms, median_ms, rates);
}

}  // namespace fib::cuda
