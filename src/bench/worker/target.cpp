// Sampling draws through any target (bench/worker/target.h).
#include "target.h"

namespace fib::bench::detail {

bool draw_samples(Target& target, int set, int draws, std::uint64_t* call,
                  std::vector<std::vector<Tensor>>* per_output, Failure* failure) {
  for (int d = 0; d < draws; ++d) {
    target.prepare(set, *call, /*flush=*/false);
    if (!target.call(*call, failure) || !target.verify(*call, failure)) return false;
    ++*call;
    auto outs = target.outputs();
    if (per_output->size() < outs.size()) per_output->resize(outs.size());
    for (std::size_t i = 0; i < outs.size(); ++i) (*per_output)[i].push_back(outs[i].second);
  }
  return true;
}

}  // namespace fib::bench::detail
