// Clocks, temperatures (die and memory), power and clock-event (throttle) reasons of a GPU, read
// through NVML. NVML is loaded at run time (dlopen of libnvidia-ml.so.1, the driver's copy): fib
// has no link dependency on it, and where it is absent or does not know the device the fields are
// simply missing (ClockReading::why_missing says why), never an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fib/cuda/runtime.h"
#include "fib/trace/json_reader.h"

namespace fib::cuda {

// NVML's clock-event reason bits (nvmlClocksEventReason*, formerly ...ThrottleReason*).
namespace clock_reason {
inline constexpr std::uint64_t kGpuIdle = 0x1;
inline constexpr std::uint64_t kApplicationsClocksSetting = 0x2;
inline constexpr std::uint64_t kSwPowerCap = 0x4;
inline constexpr std::uint64_t kHwSlowdown = 0x8;
inline constexpr std::uint64_t kSyncBoost = 0x10;
inline constexpr std::uint64_t kSwThermalSlowdown = 0x20;
inline constexpr std::uint64_t kHwThermalSlowdown = 0x40;
inline constexpr std::uint64_t kHwPowerBrakeSlowdown = 0x80;
inline constexpr std::uint64_t kDisplayClockSetting = 0x100;
// The reasons that mean the clocks were held below what the load asked for.
inline constexpr std::uint64_t kSlowdowns =
    kSwPowerCap | kHwSlowdown | kSwThermalSlowdown | kHwThermalSlowdown | kHwPowerBrakeSlowdown;
}  // namespace clock_reason

// The names of the set bits ("sw_power_cap", "hw_thermal_slowdown", ...; unknown bits as hex).
std::vector<std::string> clock_reason_names(std::uint64_t reasons);

struct ClockReading {
  bool available = false;   // NVML answered for this device (some fields may still be missing)
  std::string why_missing;  // when not available: "NVML not found (libnvidia-ml.so.1: ...)"
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned> memory_clock_mhz;
  std::optional<unsigned> temperature_c;         // the GPU die
  std::optional<unsigned> memory_temperature_c;  // the HBM stacks (boards with such a sensor)
  std::optional<double> power_watts;
  std::optional<std::uint64_t> clock_reasons;  // clock_reason bits
  // Whether a slowdown reason (power cap, thermal, hardware slowdown) was active.
  bool slowed_down() const {
    return clock_reasons && (*clock_reasons & clock_reason::kSlowdowns) != 0;
  }
};

// Reads the device's current state. The NVML device is found by PCI bus id
// (DeviceInfo::pci_bus_id). Never throws. `reasons_only`: just the clock-event reasons (one
// query; the timer reads them after every batch).
ClockReading read_clocks(const DeviceInfo& device, bool reasons_only = false);
// Missing fields are left out; `available: false` with the reason when NVML could not answer.
Json to_json(const ClockReading& c);

}  // namespace fib::cuda
