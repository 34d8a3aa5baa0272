// Dispatch from a KernelSpec to its op family's generator, and the op_type of each spec.
#include <fmt/format.h>

#include "onboard/generators/families.h"

namespace fib::onboard {

namespace {

struct Generate {
  const GenContext& ctx;
  Definition operator()(const GemmKernel& k) const { return gen::gemm(k, ctx); }
  Definition operator()(const RmsNormKernel& k) const { return gen::rmsnorm(k, ctx); }
  Definition operator()(const GqaPagedKernel& k) const { return gen::gqa_paged(k, ctx); }
  Definition operator()(const GqaRaggedKernel& k) const { return gen::gqa_ragged(k, ctx); }
  Definition operator()(const MlaPagedKernel& k) const { return gen::mla_paged(k, ctx); }
  Definition operator()(const MlaRaggedKernel& k) const { return gen::mla_ragged(k, ctx); }
  Definition operator()(const DsaAttentionKernel& k) const { return gen::dsa_attention(k, ctx); }
  Definition operator()(const DsaIndexerKernel& k) const { return gen::dsa_indexer(k, ctx); }
  Definition operator()(const GdnKernel& k) const { return gen::gdn(k, ctx); }
  Definition operator()(const MambaKernel& k) const { return gen::mamba_ssu(k, ctx); }
  Definition operator()(const MoeKernel& k) const { return gen::moe(k, ctx); }
  Definition operator()(const RopeKernel& k) const { return gen::rope(k, ctx); }
  Definition operator()(const SamplingKernel& k) const { return gen::sampling(k, ctx); }
};

struct OpType {
  std::string_view operator()(const GemmKernel&) const { return "gemm"; }
  std::string_view operator()(const RmsNormKernel&) const { return "rmsnorm"; }
  std::string_view operator()(const GqaPagedKernel&) const { return "gqa_paged"; }
  std::string_view operator()(const GqaRaggedKernel&) const { return "gqa_ragged"; }
  std::string_view operator()(const MlaPagedKernel&) const { return "mla_paged"; }
  std::string_view operator()(const MlaRaggedKernel&) const { return "mla_ragged"; }
  std::string_view operator()(const DsaAttentionKernel&) const { return "dsa_paged"; }
  std::string_view operator()(const DsaIndexerKernel&) const { return "dsa_paged"; }
  std::string_view operator()(const GdnKernel&) const { return "gdn"; }
  std::string_view operator()(const MambaKernel&) const { return "mamba_ssu"; }
  std::string_view operator()(const MoeKernel&) const { return "moe"; }
  std::string_view operator()(const RopeKernel&) const { return "rope"; }
  std::string_view operator()(const SamplingKernel&) const { return "sampling"; }
};

}  // namespace

Definition generate_definition(const KernelSpec& k, const GenContext& ctx) {
  return std::visit(Generate{ctx}, k);
}

std::string_view op_type_of(const KernelSpec& k) { return std::visit(OpType{}, k); }

std::vector<LegacyInterface> legacy_interfaces(const Definition& canonical) {
  if (canonical.op_type == "gqa_paged") return gen::gqa_paged_legacy(canonical);
  if (canonical.op_type == "mla_paged") return gen::mla_paged_legacy(canonical);
  if (canonical.op_type == "moe") return gen::moe_legacy(canonical);
  return {};
}

std::vector<std::string> generated_op_types() {
  return {"dsa_paged", "gdn",        "gemm", "gqa_paged", "gqa_ragged", "mamba_ssu",
          "mla_paged", "mla_ragged", "moe",  "rmsnorm",   "rope",       "sampling"};
}

}  // namespace fib::onboard
