// NVML through dlopen (include/fib/cuda/clocks.h). Only the few types and functions fib reads are
// declared here, as NVML's own header declares them; no link dependency on NVML.
#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "fib/cuda/clocks.h"

namespace fib::cuda {

namespace {

using nvmlReturn_t = int;  // NVML_SUCCESS = 0
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
constexpr int kNvmlClockSm = 1;                // NVML_CLOCK_SM
constexpr int kNvmlClockMem = 2;               // NVML_CLOCK_MEM
constexpr int kNvmlTemperatureGpu = 0;         // NVML_TEMPERATURE_GPU
constexpr unsigned kNvmlFieldMemoryTemp = 82;  // NVML_FI_DEV_MEMORY_TEMP (HBM, degrees C)
// NVML_VALUE_TYPE_UNSIGNED_INT, _UNSIGNED_LONG and _UNSIGNED_LONG_LONG: the types a temperature
// field may come in.
constexpr int kNvmlValueUnsignedInt = 1;
constexpr int kNvmlValueUnsignedLong = 2;
constexpr int kNvmlValueUnsignedLongLong = 3;

// nvmlFieldValue_t, as nvml.h lays it out: the query fills valueType, nvmlReturn and value.
struct NvmlFieldValue {
  unsigned field_id;
  unsigned scope_id;
  long long timestamp;
  long long latency_us;
  int value_type;
  nvmlReturn_t result;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
    unsigned short us;
  } value;
};
static_assert(sizeof(NvmlFieldValue) == 40, "nvmlFieldValue_t is 40 bytes");

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using HandleByPciFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using ClockInfoFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using TemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using PowerFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
using ReasonsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using FieldValuesFn = nvmlReturn_t (*)(nvmlDevice_t, int, NvmlFieldValue*);

// The library, loaded and initialized once per process; nvmlShutdown at exit.
class Nvml {
 public:
  static Nvml& get() {
    static Nvml nvml;
    return nvml;
  }
  ~Nvml() {
    if (ready_ && shutdown_) shutdown_();
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool ready() const { return ready_; }
  const std::string& why() const { return why_; }
  std::string error(nvmlReturn_t r) const {
    const char* s = error_string_ ? error_string_(r) : nullptr;
    return s ? fmt::format("{} ({})", s, r) : fmt::format("NVML error {}", r);
  }

  HandleByPciFn handle_by_pci = nullptr;
  ClockInfoFn clock_info = nullptr;
  TemperatureFn temperature = nullptr;
  PowerFn power = nullptr;
  ReasonsFn reasons = nullptr;
  FieldValuesFn field_values = nullptr;
  std::mutex mutex;  // NVML is thread-safe; this keeps readings of one device together
  // Handles by PCI bus id (looking one up walks NVML's device list; the timer reads every batch).
  std::map<std::string, nvmlDevice_t> handles;

 private:
  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      why_ = fmt::format("NVML not found ({})", e ? e : "libnvidia-ml.so.1");
      return;
    }
    auto sym = [&](const char* name) { return dlsym(lib, name); };
    auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
    shutdown_ = reinterpret_cast<ShutdownFn>(sym("nvmlShutdown"));
    error_string_ = reinterpret_cast<ErrorStringFn>(sym("nvmlErrorString"));
    handle_by_pci = reinterpret_cast<HandleByPciFn>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
    clock_info = reinterpret_cast<ClockInfoFn>(sym("nvmlDeviceGetClockInfo"));
    temperature = reinterpret_cast<TemperatureFn>(sym("nvmlDeviceGetTemperature"));
    power = reinterpret_cast<PowerFn>(sym("nvmlDeviceGetPowerUsage"));
    field_values = reinterpret_cast<FieldValuesFn>(sym("nvmlDeviceGetFieldValues"));
    // Renamed in NVML 12.2 ("throttle" reasons became "clocks event" reasons); same bits.
    reasons = reinterpret_cast<ReasonsFn>(sym("nvmlDeviceGetCurrentClocksEventReasons"));
    if (!reasons) {
      reasons = reinterpret_cast<ReasonsFn>(sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
    }
    if (!init || !handle_by_pci) {
      why_ = "NVML lacks nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2";
      return;
    }
    const nvmlReturn_t r = init();
    if (r != 0) {
      why_ = "nvmlInit_v2 failed: " + error(r);
      return;
    }
    ready_ = true;
  }

  bool ready_ = false;
  std::string why_;
  ShutdownFn shutdown_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
};

}  // namespace

std::vector<std::string> clock_reason_names(std::uint64_t reasons) {
  static constexpr std::pair<std::uint64_t, const char*> kNames[] = {
      {clock_reason::kGpuIdle, "gpu_idle"},
      {clock_reason::kApplicationsClocksSetting, "applications_clocks_setting"},
      {clock_reason::kSwPowerCap, "sw_power_cap"},
      {clock_reason::kHwSlowdown, "hw_slowdown"},
      {clock_reason::kSyncBoost, "sync_boost"},
      {clock_reason::kSwThermalSlowdown, "sw_thermal_slowdown"},
      {clock_reason::kHwThermalSlowdown, "hw_thermal_slowdown"},
      {clock_reason::kHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
      {clock_reason::kDisplayClockSetting, "display_clock_setting"},
  };
  std::vector<std::string> out;
  std::uint64_t known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if (reasons & bit) out.emplace_back(name);
  }
  if (reasons & ~known) out.push_back(fmt::format("0x{:x}", reasons & ~known));
  return out;
}

ClockReading read_clocks(const DeviceInfo& device, bool reasons_only) {
  ClockReading c;
  Nvml& nvml = Nvml::get();
  if (!nvml.ready()) {
    c.why_missing = nvml.why();
    return c;
  }
  if (device.pci_bus_id.empty()) {
    c.why_missing = "the CUDA device reported no PCI bus id";
    return c;
  }
  std::lock_guard<std::mutex> lock(nvml.mutex);
  nvmlDevice_t handle = nullptr;
  if (auto it = nvml.handles.find(device.pci_bus_id); it != nvml.handles.end()) {
    handle = it->second;
  } else {
    const nvmlReturn_t r = nvml.handle_by_pci(device.pci_bus_id.c_str(), &handle);
    if (r != 0 || handle == nullptr) {
      c.why_missing =
          fmt::format("NVML has no device at PCI bus id {}: {}", device.pci_bus_id, nvml.error(r));
      return c;
    }
    nvml.handles.emplace(device.pci_bus_id, handle);
  }
  c.available = true;
  unsigned long long bits = 0;
  if (nvml.reasons && nvml.reasons(handle, &bits) == 0) c.clock_reasons = bits;
  if (reasons_only) return c;
  unsigned v = 0;
  if (nvml.clock_info && nvml.clock_info(handle, kNvmlClockSm, &v) == 0) c.sm_clock_mhz = v;
  if (nvml.clock_info && nvml.clock_info(handle, kNvmlClockMem, &v) == 0) c.memory_clock_mhz = v;
  if (nvml.temperature && nvml.temperature(handle, kNvmlTemperatureGpu, &v) == 0) {
    c.temperature_c = v;
  }
  if (nvml.power && nvml.power(handle, &v) == 0) c.power_watts = v * 1e-3;  // milliwatts
  // HBM's own sensor: memory speed shifts (refresh, memory thermal slowdown) follow it, not the
  // GPU die's temperature. Boards without one answer NOT_SUPPORTED in the field's result.
  if (nvml.field_values) {
    NvmlFieldValue f{};
    f.field_id = kNvmlFieldMemoryTemp;
    if (nvml.field_values(handle, 1, &f) == 0 && f.result == 0) {
      if (f.value_type == kNvmlValueUnsignedInt) {
        c.memory_temperature_c = f.value.ui;
      } else if (f.value_type == kNvmlValueUnsignedLong ||
                 f.value_type == kNvmlValueUnsignedLongLong) {  // both 8 bytes on Linux x86-64
        c.memory_temperature_c = static_cast<unsigned>(f.value.ull);
      }
    }
  }
  return c;
}

Json to_json(const ClockReading& c) {
  Json j{{"available", c.available}};
  if (!c.available) {
    j["why_missing"] = c.why_missing;
    return j;
  }
  if (c.sm_clock_mhz) j["sm_clock_mhz"] = *c.sm_clock_mhz;
  if (c.memory_clock_mhz) j["memory_clock_mhz"] = *c.memory_clock_mhz;
  if (c.temperature_c) j["temperature_c"] = *c.temperature_c;
  if (c.memory_temperature_c) j["memory_temperature_c"] = *c.memory_temperature_c;
  if (c.power_watts) j["power_watts"] = *c.power_watts;
  if (c.clock_reasons) {
    j["clock_reasons"] = clock_reason_names(*c.clock_reasons);
    j["slowed_down"] = c.slowed_down();
  }
  return j;
}

}  // namespace fib::cuda
