// fib's version string (also written into every trace's environment).
#pragma once

#include <string_view>

namespace fib {
inline constexpr std::string_view kVersion = "0.1.0";

// The harness's defences against solutions that bend their own verdicts (issue #37: no pen
// after the calls, no work outside the clock, a harness expensive to patch, one solution per
// process, builds in the sandbox). Every trace records it (environment.extra.defences); raised
// whenever a defence lands or changes, so that what trusts a trace for its verdict (fib serve's
// answers to an identical submission) can require one written under the current defences.
inline constexpr int kDefenceVersion = 1;
}  // namespace fib
