// cuda:gqa_ragged: causal prefill over ragged q/k/v (ragged_prefill.cpp).
#include "reference_cuda/attention_core.h"

namespace fib::reference_cuda::detail {

std::unique_ptr<Kernel> make_gqa_ragged() {
  return attention::make_ragged_prefill("gqa_ragged", "head_dim", "head_dim");
}

}  // namespace fib::reference_cuda::detail
