// Where fib computes: the CPU or one CUDA device. Its text form ("cpu", "cuda:N") is what traces,
// worker messages and the serve API carry; code inside fib passes the typed value and converts at
// those edges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fib {

struct Device {
  enum class Kind : std::uint8_t { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int ordinal = 0;  // the CUDA device's; 0 for the CPU

  static Device cpu() { return {}; }
  static Device cuda(int ordinal) { return {Kind::kCuda, ordinal}; }
  bool is_cpu() const { return kind == Kind::kCpu; }
  bool is_cuda() const { return kind == Kind::kCuda; }
  std::string to_string() const;  // "cpu" or "cuda:N"
  bool operator==(const Device&) const = default;
};

// "cpu", "cuda" (CUDA device 0) or "cuda:N" with N a non-negative integer; nullopt otherwise.
std::optional<Device> parse_device(std::string_view text);

}  // namespace fib
