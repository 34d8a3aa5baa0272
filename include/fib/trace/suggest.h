// Suggestions for misspelled names: "did you mean 'batch_size'?".
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fib {

// Levenshtein distance (insertions, deletions, substitutions; case-insensitive).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `name` if it is close enough to be a plausible typo (distance at
// most a third of the length, at least 1, or one name contains the other); empty otherwise.
std::string closest_match(std::string_view name, std::span<const std::string> candidates);
std::string closest_match(std::string_view name, std::span<const std::string_view> candidates);

// "did you mean 'x'?" or "expected one of: a, b, c" when nothing is close.
std::string suggest(std::string_view name, std::span<const std::string> candidates);
std::string suggest(std::string_view name, std::span<const std::string_view> candidates);

}  // namespace fib
