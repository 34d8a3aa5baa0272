// fib's version string (also written into every trace's environment).
#pragma once

#include <string_view>

namespace fib {
inline constexpr std::string_view kVersion = "0.1.0";
}
