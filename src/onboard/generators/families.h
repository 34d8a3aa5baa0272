// The generator of each op family, one per file named by its op_type (gemm.cpp, rmsnorm.cpp,
// gqa_paged.cpp, ...). registry.cpp dispatches a KernelSpec to the right one.
#pragma once

#include <vector>

#include "fib/onboard/generators.h"
#include "fib/onboard/kernel_spec.h"

namespace fib::onboard::gen {

Definition gemm(const GemmKernel& k, const GenContext& ctx);
Definition rmsnorm(const RmsNormKernel& k, const GenContext& ctx);
Definition gqa_paged(const GqaPagedKernel& k, const GenContext& ctx);
Definition gqa_ragged(const GqaRaggedKernel& k, const GenContext& ctx);
Definition mla_paged(const MlaPagedKernel& k, const GenContext& ctx);
Definition mla_ragged(const MlaRaggedKernel& k, const GenContext& ctx);
Definition dsa_attention(const DsaAttentionKernel& k, const GenContext& ctx);
Definition dsa_indexer(const DsaIndexerKernel& k, const GenContext& ctx);
Definition gdn(const GdnKernel& k, const GenContext& ctx);
Definition mamba_ssu(const MambaKernel& k, const GenContext& ctx);
Definition moe(const MoeKernel& k, const GenContext& ctx);
Definition rope(const RopeKernel& k, const GenContext& ctx);
Definition sampling(const SamplingKernel& k, const GenContext& ctx);

// Interfaces the dataset used before the current convention, per op family.
std::vector<LegacyInterface> gqa_paged_legacy(const Definition& canonical);
std::vector<LegacyInterface> mla_paged_legacy(const Definition& canonical);
std::vector<LegacyInterface> moe_legacy(const Definition& canonical);

// Shared by the paged attention families: the ps>1 prefill's kv_last_page_len shaped
// [len_indptr] and no batch_size axis (corpus inconsistency 2).
std::vector<LegacyInterface> last_page_len_legacy(const Definition& canonical);

// The causal attention helper (`_attend_causal`) the GQA and MLA prefill references share.
std::string_view attend_causal_source();
// The description sentence and the `sinks` input description of the attention-sink variants.
std::string_view sink_sentence();
std::string_view sink_input_description();

}  // namespace fib::onboard::gen
