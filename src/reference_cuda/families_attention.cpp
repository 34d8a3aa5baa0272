// The CUDA references for attention (GQA, MLA, DSA) and recurrent-state families (GDN, Mamba),
// in lookup order.
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

void add_attention_kernels(KernelList& out) { (void)out; }

}  // namespace fib::reference_cuda::detail
