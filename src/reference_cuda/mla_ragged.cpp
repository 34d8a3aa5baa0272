// cuda:mla_ragged: causal prefill over ragged q/k/v (ragged_prefill.cpp).
#include "reference_cuda/attention_core.h"

namespace fib::reference_cuda::detail {

std::unique_ptr<Kernel> make_mla_ragged() {
  return attention::make_ragged_prefill("mla_ragged", "qk_dim", "vo_dim");
}

}  // namespace fib::reference_cuda::detail
