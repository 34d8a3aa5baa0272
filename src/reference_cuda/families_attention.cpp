// The CUDA references for attention (GQA, MLA, DSA) and recurrent-state families (GDN, Mamba),
// in lookup order.
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda::detail {

std::unique_ptr<Kernel> make_gqa_paged();   // attention_gqa.cpp: decode and causal prefill
std::unique_ptr<Kernel> make_gqa_ragged();  // attention_ragged.cpp: causal prefill
std::unique_ptr<Kernel> make_mla_paged();   // attention_mla.cpp: decode and causal prefill
std::unique_ptr<Kernel> make_mla_ragged();  // attention_ragged.cpp: causal prefill
std::unique_ptr<Kernel> make_dsa_sparse_attention();  // attention_dsa.cpp
std::unique_ptr<Kernel> make_dsa_topk_indexer();      // attention_dsa_indexer.cu
std::unique_ptr<Kernel> make_gdn();                   // gdn.cu: decode, mtp, prefill
std::unique_ptr<Kernel> make_mamba_ssu();             // mamba_ssu.cu

void add_attention_kernels(KernelList& out) {
  out.push_back(make_gqa_paged());
  out.push_back(make_gqa_ragged());
  out.push_back(make_mla_paged());
  out.push_back(make_mla_ragged());
  out.push_back(make_dsa_sparse_attention());
  out.push_back(make_dsa_topk_indexer());
  out.push_back(make_gdn());
  out.push_back(make_mamba_ssu());
}

}  // namespace fib::reference_cuda::detail
