// One callable thing under the schedule — a solution or a native reference, on the host or on
// a device — as the worker's schedule loops drive it: prepare a call on an input set, make it,
// check it, read what it produced. The CPU loop times each call on the host clock; the GPU loop
// hands the same steps to the GPU timer as hooks around its calls (gpu_trials.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fib/tensor/tensor.h"
#include "worker_common.h"

namespace fib::bench::detail {

class Target {
 public:
  virtual ~Target() = default;
  // Prepares call `call` on input set `set` (outputs poisoned, caches flushed where `flush`)
  // outside the timed region.
  virtual void prepare(int set, std::uint64_t call, bool flush) = 0;
  // The timed call. Returns false with *failure filled on an error.
  virtual bool call(std::uint64_t call, Failure* failure) = 0;
  // Checks after the call (guards, inputs, results), outside the timed region.
  virtual bool verify(std::uint64_t call, Failure* failure) = 0;
  // The outputs of the last call, on the host (for checked calls and sampling draws).
  virtual std::vector<std::pair<std::string, Tensor>> outputs() = 0;
  // Integer poison sentinels of the last call, by output (for "never written" messages).
  virtual std::map<std::string, std::int64_t> poison() const { return {}; }
};

// `draws` calls on input set `set`, numbered from *call (which counts the calls made and
// checked): per output, the draws' values, for the distribution check of a sampling solution.
// False with *failure filled when a call fails.
bool draw_samples(Target& target, int set, int draws, std::uint64_t* call,
                  std::vector<std::vector<Tensor>>* per_output, Failure* failure);

}  // namespace fib::bench::detail
