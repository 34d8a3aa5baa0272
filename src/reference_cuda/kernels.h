// Internal to the CUDA references: the kernels each op type adds to the list, and helpers every
// kernel uses.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fib/reference_cuda/reference_cuda.h"
#include "fib/trace/op_types.h"

namespace fib::reference_cuda::detail {

using KernelList = std::vector<std::unique_ptr<Kernel>>;

// Each op type's kernels, added to the list in their lookup order by the op type's file
// (src/reference_cuda/<op_type>.cpp or .cu; the attention op types share attention_core.cu and
// ragged_prefill.cpp), for the op types whose reference_cuda column in fib/trace/op_types.def
// says yes.
#define FIB_OP_TYPE(op, recipe, family, ref, ref_cuda, ...) \
  FIB_OP_WHEN(ref_cuda, void add_##op(KernelList& list);)
#include "fib/trace/op_types.def"
// dsa_paged's second kernel, in dsa_paged_indexer.cu.
std::unique_ptr<Kernel> make_dsa_topk_indexer();

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
