// Rng: a small, fast, seedable random generator (xoshiro256**) whose streams are derived from a
// base seed and a label, so each input of a workload gets its own reproducible stream.
#pragma once

#include <cstdint>
#include <string_view>

namespace fib {

class Rng {
 public:
  explicit Rng(std::uint64_t seed);
  // A seed for the stream named `label` under `seed` (stable across runs and platforms).
  static std::uint64_t derive(std::uint64_t seed, std::string_view label);

  std::uint64_t next();
  double uniform();                                        // [0, 1)
  double uniform(double lo, double hi);                    // [lo, hi)
  double normal();                                         // N(0, 1)
  std::int64_t randint(std::int64_t lo, std::int64_t hi);  // [lo, hi), hi > lo

 private:
  std::uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace fib
