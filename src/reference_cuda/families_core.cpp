// The CUDA references for matrix products, norms, RoPE, sampling and MoE, in lookup order.
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

std::unique_ptr<Kernel> make_rmsnorm();   // rmsnorm.cu: rmsnorm and fused_add_rmsnorm
std::unique_ptr<Kernel> make_gemm();      // gemm.cu: C = A @ B^T through cuBLAS, fp32 sums
std::unique_ptr<Kernel> make_rope();      // rope.cu: NeoX and GPT-J pairs, as the CPU kernel
std::unique_ptr<Kernel> make_sampling();  // sampling.cu: top_k, top_p, top_k_top_p
std::unique_ptr<Kernel> make_moe();       // moe.cu: every moe variant the CPU kernel covers

void add_core_kernels(KernelList& out) {
  out.push_back(make_rmsnorm());
  out.push_back(make_gemm());
  out.push_back(make_rope());
  out.push_back(make_sampling());
  out.push_back(make_moe());
}

}  // namespace fib::reference_cuda::detail
