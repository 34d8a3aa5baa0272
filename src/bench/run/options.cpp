// fib run's enumerated options: their names and their parsing at the command line.
#include <fmt/format.h>

#include "fib/base/diagnostics.h"
#include "fib/bench/run/run.h"
#include "timer.h"

namespace fib::bench {

std::string_view option_name(GpuTimer timer) {
  switch (timer) {
    case GpuTimer::kEvents:
      return "events";
    case GpuTimer::kEventsRaw:
      return "events-raw";
    case GpuTimer::kCupti:
      return "cupti";
  }
  return "events";
}

std::string_view option_name(InputsOn where) {
  return where == InputsOn::kHost ? "host" : "device";
}

std::string_view option_name(ReferenceChoice reference) {
  switch (reference) {
    case ReferenceChoice::kAuto:
      return "auto";
    case ReferenceChoice::kNative:
      return "native";
    case ReferenceChoice::kPython:
      return "python";
  }
  return "auto";
}

GpuTimer parse_gpu_timer(const std::string& name) {
  detail::check_gpu_timer(name);  // throws for an unknown name, naming the closest
  return name == "cupti"        ? GpuTimer::kCupti
         : name == "events-raw" ? GpuTimer::kEventsRaw
                                : GpuTimer::kEvents;
}

InputsOn parse_inputs_on(const std::string& name) {
  if (name == "host") return InputsOn::kHost;
  if (name == "device") return InputsOn::kDevice;
  throw Error("--inputs-on", fmt::format("'{}' is neither host nor device", name));
}

ReferenceChoice parse_reference_choice(const std::string& name) {
  if (name == "auto") return ReferenceChoice::kAuto;
  if (name == "native") return ReferenceChoice::kNative;
  if (name == "python") return ReferenceChoice::kPython;
  throw Error("--reference", fmt::format("unknown reference '{}'", name),
              "expected native, python or auto");
}

ReferenceCacheChoice parse_reference_cache(const std::string& text) {
  if (text == "off") return ReferenceCacheChoice::off();
  if (text.empty()) return {};
  return ReferenceCacheChoice::in(text);
}

}  // namespace fib::bench
