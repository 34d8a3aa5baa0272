// cuda:gqa_ragged: causal prefill over ragged q/k/v (ragged_prefill.cpp).
#include "reference_cuda/attention_core.h"

namespace fib::reference_cuda::detail {

void add_gqa_ragged(KernelList& list) {
  list.push_back(attention::make_ragged_prefill("gqa_ragged", "head_dim", "head_dim"));
}

}  // namespace fib::reference_cuda::detail
