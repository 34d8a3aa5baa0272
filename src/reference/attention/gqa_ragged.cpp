// gqa_ragged: causal prefill over ragged q/k/v (ragged_prefill.cpp), one head_dim for queries, keys
// and values.
#include "reference/attention/attention_core.h"

namespace fib::reference::detail {

void add_gqa_ragged(KernelList& list) {
  list.push_back(attention::make_ragged_prefill("gqa_ragged", "head_dim", "head_dim"));
}

}  // namespace fib::reference::detail
