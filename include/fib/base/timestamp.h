// The time stamps fib records (traces, serve's tasks): one format everywhere, so records sort and
// compare as strings.
#pragma once

#include <string>

namespace fib {

// Now, in UTC with microseconds: "2025-01-31T12:00:00.123456+00:00".
std::string utc_timestamp();

}  // namespace fib
