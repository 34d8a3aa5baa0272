#include "fib/trace/suggest.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace fib {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

template <typename T>
std::string closest_impl(std::string_view name, std::span<const T> candidates) {
  std::string best;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  for (const auto& c : candidates) {
    std::string_view cv(c);
    std::size_t d = edit_distance(name, cv);
    const std::size_t limit = std::max<std::size_t>(1, std::max(name.size(), cv.size()) / 3);
    const bool contains = !name.empty() && !cv.empty() &&
                          (cv.find(name) != std::string_view::npos ||
                           name.find(cv) != std::string_view::npos);
    if (d > limit && !contains) continue;
    if (d < best_d) {
      best_d = d;
      best = std::string(cv);
    }
  }
  return best;
}

template <typename T>
std::string suggest_impl(std::string_view name, std::span<const T> candidates) {
  std::string m = closest_impl(name, candidates);
  if (!m.empty()) return "did you mean '" + m + "'?";
  if (candidates.empty()) return {};
  std::string out = "expected one of: ";
  std::size_t n = 0;
  for (const auto& c : candidates) {
    if (n++ > 0) out += ", ";
    if (n > 12) {
      out += "...";
      break;
    }
    out += std::string_view(c);
  }
  return out;
}

}  // namespace

std::string closest_match(std::string_view name, std::span<const std::string> candidates) {
  return closest_impl(name, candidates);
}
std::string closest_match(std::string_view name, std::span<const std::string_view> candidates) {
  return closest_impl(name, candidates);
}
std::string suggest(std::string_view name, std::span<const std::string> candidates) {
  return suggest_impl(name, candidates);
}
std::string suggest(std::string_view name, std::span<const std::string_view> candidates) {
  return suggest_impl(name, candidates);
}

}  // namespace fib
