// Achieved bandwidth and FLOP rate of a timed call against the device's peaks, and the
// plausibility check on them: a call that seems to move bytes or do arithmetic faster than the
// hardware can has skipped work (or its declared bytes/FLOPs are wrong). Pure arithmetic; no
// GPU needed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fib/trace/json_reader.h"

namespace fib::cuda {

// The arithmetic a call's FLOPs run on, for the peak they are compared with.
enum class MathKind : std::uint8_t {
  kBf16Tensor,  // dense bf16 tensor-core math (fp32 accumulation)
  kFp16Tensor,
  kFp8Tensor,
  kTf32Tensor,
  kFp32,  // plain fp32 FMA units (no tensor cores)
};
std::string_view math_kind_name(MathKind kind);  // "bf16", "fp16", "fp8", "tf32", "fp32"

// A device's peaks. DRAM bandwidth comes from the device's own attributes
// (DeviceInfo::peak_dram_bytes_per_second); FLOP rates from public datasheet figures keyed by
// device name ("h100_sxm", "h200_sxm"; "unknown" has none).
struct DevicePeaks {
  std::string key = "unknown";
  double dram_bytes_per_second = 0;  // 0: unknown
  std::optional<double> flops_per_second(MathKind kind) const;
  // Datasheet dense rates (FLOP/s) of known devices; 0 where unknown.
  double bf16 = 0, fp16 = 0, fp8 = 0, tf32 = 0, fp32 = 0;
};
// "NVIDIA H100 80GB HBM3" (the SXM part) -> h100_sxm; "NVIDIA H200" -> h200_sxm; PCIe and NVL
// parts, and everything else, -> unknown (their FLOP rates are lower and not tabulated here).
DevicePeaks device_peaks(std::string_view device_name, double peak_dram_bytes_per_second);

// Achieved over peak above this factor is reported as implausible.
inline constexpr double kImplausibleFactor = 1.05;
inline constexpr std::string_view kImplausibleNote =
    "implausible: faster than the hardware allows; the kernel probably skipped work";

struct RooflineInput {
  std::optional<double> bytes;  // bytes the call must move through DRAM (when known)
  std::optional<double> flops;  // floating-point operations (when known)
  MathKind math = MathKind::kBf16Tensor;
  double median_ms = 0;
};

struct Roofline {
  std::optional<double> bytes_per_second, bandwidth_fraction;  // of peak DRAM bandwidth
  std::optional<double> flops_per_second, flops_fraction;      // of the MathKind's peak
  std::optional<double> floor_ms;  // the larger of bytes/peak and flops/peak: no faster is possible
  std::string bound;               // "memory" or "compute" (the larger floor), "" when unknown
  // floor_ms / median_ms: the share of the hardware's speed the call reached (1: as fast as the
  // device's peaks allow; above 1 only for an implausible call).
  std::optional<double> share;
  bool plausible = true;
  std::string note;  // kImplausibleNote and which rate, when not plausible
};
Roofline roofline(const RooflineInput& in, const DevicePeaks& peaks);
Json to_json(const Roofline& r);
// One line for a PASSED trace's log: "at 42% of the roofline (memory-bound: ...)"; empty when
// the share is unknown.
std::string roofline_line(const Roofline& r, double median_ms);

}  // namespace fib::cuda
