#include <algorithm>
#include <cmath>
#include <numeric>

#include "fib/bench/timing/timing.h"

namespace fib::bench {

namespace {
double interpolate(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}
}  // namespace

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return interpolate(v, q);
}

SampleStats summarize(std::span<const double> samples) {
  SampleStats s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = interpolate(v, 0.5);
  s.p10 = interpolate(v, 0.1);
  s.p90 = interpolate(v, 0.9);
  s.iqr = interpolate(v, 0.75) - interpolate(v, 0.25);
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stdev = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0;
  return s;
}

bool precise_enough(std::span<const double> samples, const NoiseCriterion& c) {
  if (samples.size() < std::max<std::size_t>(c.min_samples, 3)) return false;
  const SampleStats s = summarize(samples);
  if (s.median <= 0) return true;
  // The median's standard error is about 1.2533 * sigma / sqrt(n) for a normal sample;
  // sigma is estimated robustly as IQR / 1.349, and 1.96 gives a ~95% interval.
  const double sigma = s.iqr / 1.349;
  const double half_width = 1.96 * 1.2533 * sigma / std::sqrt(static_cast<double>(s.count));
  return half_width / s.median <= c.rel_precision;
}

Json stats_to_json(const SampleStats& s) {
  return Json{{"count", s.count}, {"median_ms", s.median}, {"mean_ms", s.mean},
              {"min_ms", s.min},  {"max_ms", s.max},       {"p10_ms", s.p10},
              {"p90_ms", s.p90},  {"iqr_ms", s.iqr},       {"stdev_ms", s.stdev}};
}

}  // namespace fib::bench
