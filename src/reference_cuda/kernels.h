// Internal to the CUDA references: the factory of each op type's kernels, and helpers every
// kernel uses.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fib/reference_cuda/reference_cuda.h"

namespace fib::reference_cuda::detail {

using KernelList = std::vector<std::unique_ptr<Kernel>>;

// Factories, each in the file of its op type (src/reference_cuda/<op_type>.cpp or .cu); the
// attention op types share attention_core.cu and ragged_prefill.cpp.
std::unique_ptr<Kernel> make_rmsnorm();               // rmsnorm and fused_add_rmsnorm
std::unique_ptr<Kernel> make_gemm();                  // C = A @ B^T through cuBLAS, fp32 sums
std::unique_ptr<Kernel> make_rope();                  // NeoX and GPT-J pairs, as the CPU kernel
std::unique_ptr<Kernel> make_sampling();              // top_k, top_p, top_k_top_p
std::unique_ptr<Kernel> make_moe();                   // every moe variant the CPU kernel covers
std::unique_ptr<Kernel> make_gqa_paged();             // decode and causal prefill
std::unique_ptr<Kernel> make_gqa_ragged();            // causal prefill
std::unique_ptr<Kernel> make_mla_paged();             // decode and causal prefill
std::unique_ptr<Kernel> make_mla_ragged();            // causal prefill
std::unique_ptr<Kernel> make_dsa_sparse_attention();  // dsa_paged.cpp
std::unique_ptr<Kernel> make_dsa_topk_indexer();      // dsa_paged_indexer.cu
std::unique_ptr<Kernel> make_gdn();                   // decode, mtp, prefill
std::unique_ptr<Kernel> make_mamba_ssu();

// A CUDA kernel covers exactly the definitions the CPU reference of the same family covers
// (same math, same constants read from the reference text), so `supports` asks that one.
// `cpu_id` is the CPU kernel's id ("rmsnorm", "gqa_paged.decode", ...).
bool cpu_supports(std::string_view cpu_id, const Definition& def, std::string* why);

// An axis value; throws fib::Error naming the axis when absent.
std::int64_t axis(const CallContext& ctx, std::string_view name);
// A new (uninitialized) device output with the definition's dtype and shape.
DeviceTensor make_output(const CallContext& ctx, std::string_view name);
// A numeric constant the definition's reference fixes (EPS = 1e-6, ...), trying each key in
// order; throws fib::Error when none is there.
double reference_constant(const Definition& def, std::initializer_list<std::string_view> keys);

// Scratch memory for one call, in stream order (cudaMallocFromPoolAsync / cudaFreeAsync), from a
// pool of the current device's own that keeps up to kScratchKeepBytes of freed memory between
// calls. The default pool hands freed memory back to the driver at every synchronization, so a
// reference that synchronizes mid-call (MoE, for its per-expert counts) would map its scratch
// afresh on every call (6% of MoE's 901-token call on an H100: docs/reference-families.md).
inline constexpr std::size_t kScratchKeepBytes = std::size_t{4} << 30;
void* scratch_alloc(std::size_t bytes, cudaStream_t stream);

}  // namespace fib::reference_cuda::detail
