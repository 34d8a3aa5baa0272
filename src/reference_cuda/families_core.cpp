// The CUDA references for matrix products, norms, RoPE, sampling and MoE, in lookup order.
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

std::unique_ptr<Kernel> make_rmsnorm();  // rmsnorm.cu: rmsnorm and fused_add_rmsnorm

void add_core_kernels(KernelList& out) { out.push_back(make_rmsnorm()); }

}  // namespace fib::reference_cuda::detail
