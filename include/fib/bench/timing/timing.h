// Timing statistics and the CPU timing discipline: robust summaries of latency samples
// (median with min, p10, p90, IQR and the raw samples kept), the noise criterion that ends a
// trial early, and a cache flush of exactly the memory a call touches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fib/trace/json_reader.h"

namespace fib::bench {

struct SampleStats {
  std::size_t count = 0;
  double median = 0, mean = 0, min = 0, max = 0, p10 = 0, p90 = 0, iqr = 0, stdev = 0;
};

// Percentiles by linear interpolation between order statistics (numpy's default).
SampleStats summarize(std::span<const double> samples);
double percentile(std::vector<double> sorted_or_not, double q);

// When a trial may stop before its iteration cap: at least `min_samples`, and the median is
// known to `rel_precision` (the half-width of a ~95% confidence interval of the median,
// estimated from the interquartile range, relative to the median).
struct NoiseCriterion {
  std::size_t min_samples = 10;
  double rel_precision = 0.005;
};
bool precise_enough(std::span<const double> samples, const NoiseCriterion& c);

// Evicts [data, data + bytes) from every cache level (clflushopt on x86-64, dc civac on
// AArch64), so the next call reads its inputs from memory as a cold call in an engine would.
void flush_from_cache(const void* data, std::size_t bytes);
// Orders the flushes before what follows.
void flush_fence();
// The size of the largest CPU cache (sysconf, else /sys; 32 MiB when neither says).
std::size_t last_level_cache_bytes();

// How the CPU worker times a call, in words, as a trace records it.
std::string cpu_timer_description();

// What the trace records about how a latency was measured.
Json stats_to_json(const SampleStats& s);

}  // namespace fib::bench
