#include "fib/base/device.h"

#include <charconv>

namespace fib {

std::string Device::to_string() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(ordinal);
}

std::optional<Device> parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  constexpr std::string_view kPrefix = "cuda:";
  if (!text.starts_with(kPrefix)) return std::nullopt;
  const std::string_view digits = text.substr(kPrefix.size());
  int n = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || n < 0) {
    return std::nullopt;
  }
  return Device::cuda(n);
}

}  // namespace fib
