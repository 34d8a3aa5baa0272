#include "fib/trace/suggest.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace fib {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: like Levenshtein, plus swapping two adjacent characters costs 1,
  // the commonest typo ("float61" is one step from "float16", not two).
  auto lower = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::size_t> d((n + 1) * (m + 1));
  auto at = [&](std::size_t i, std::size_t j) -> std::size_t& { return d[i * (m + 1) + j]; };
  for (std::size_t i = 0; i <= n; ++i) at(i, 0) = i;
  for (std::size_t j = 0; j <= m; ++j) at(0, j) = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + 1);
      }
    }
  }
  return at(n, m);
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
    const bool contains =
        !name.empty() && !cv.empty() &&
        (cv.find(name) != std::string_view::npos || name.find(cv) != std::string_view::npos);
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
