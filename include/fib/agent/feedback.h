// What an agent needs from one trace to act on it: the verdict, the latency, and the feedback
// fib recorded (correctness.extra's wrong elements and error distribution, the compiler's
// diagnostics, the roofline share), gathered from the places the trace format keeps them.
#pragma once

#include "fib/trace/json_reader.h"
#include "fib/trace/trace.h"

namespace fib::agent {

// {workload, axes, status, log, latency_ms?, reference_latency_ms?, speedup_factor?,
// correctness?: {max_absolute_error, max_relative_error, mismatches, numel, nmse, matched_ratio,
// unwritten, first_mismatch, worst_mismatch, mismatch_samples, error_distribution, nonfinite,
// trial, seed, ...: those present}, compiler_diagnostics?, roofline?}.
Json trace_feedback(const Trace& t);

}  // namespace fib::agent
