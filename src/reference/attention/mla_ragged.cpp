// mla_ragged: causal prefill over ragged q/k/v (ragged_prefill.cpp), DeepSeek's non-absorbed MLA
// prefill: qk_dim (128 nope + 64 rope) wider than vo_dim.
#include "reference/attention/attention_core.h"

namespace fib::reference::detail {

void add_mla_ragged(KernelList& list) {
  list.push_back(attention::make_ragged_prefill("mla_ragged", "qk_dim", "vo_dim"));
}

}  // namespace fib::reference::detail
