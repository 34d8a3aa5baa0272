// op_type moe_align: sgl-kernel's moe_align_block_size, which prepares the Triton fused MoE's
// grouped GEMM: the flattened (token, slot) indices of topk_ids sorted by expert, each expert's
// run padded to a multiple of block_size with the value num_tokens * top_k, the expert of each
// block, and the padded total. Output sizes are sgl-kernel's: sorted_token_ids holds
// num_tokens * top_k + num_experts * (block_size - 1) entries, expert_ids one per block of it.
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition moe_align(const MoeAlignKernel& k, const GenContext& ctx) {
  Builder b(definition_name(KernelSpec{k}), "moe_align",
            fmt::format("MoE align block size (sgl-kernel moe_align_block_size): sorts the "
                        "num_tokens * top_k (token, slot) pairs by expert over {} experts and pads "
                        "each expert's run to a multiple of block_size={}. The order within an "
                        "expert's run is unspecified. {}",
                        k.num_experts, k.block_size, provenance(ctx)));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("sgl_api:sgl_kernel.moe_align_block_size");
  b.var("num_tokens", "Number of tokens routed")
      .constant("top_k", k.top_k, "Experts per token")
      .constant("num_experts", k.num_experts, "Experts the ids index")
      .constant("block_size", k.block_size, "The grouped GEMM's M tile")
      .var("max_num_tokens_padded", "num_tokens * top_k + num_experts * (block_size - 1)")
      .var("max_num_m_blocks", "ceil(max_num_tokens_padded / block_size)")
      .constant("one", 1, "The padded total's single element");
  b.input("topk_ids", {"num_tokens", "top_k"}, DType::kInt32, "Expert index per (token, slot)");
  b.output("sorted_token_ids", {"max_num_tokens_padded"}, DType::kInt32,
           "Flattened (token, slot) indices grouped by expert; padding num_tokens * top_k");
  b.output("expert_ids", {"max_num_m_blocks"}, DType::kInt32,
           "The expert of each block; blocks past the padded total are unspecified");
  b.output("num_tokens_post_pad", {"one"}, DType::kInt32,
           "Total of the padded runs (a multiple of block_size)");
  b.constraint("max_num_tokens_padded == num_tokens * top_k + num_experts * (block_size - 1)")
      .constraint("max_num_m_blocks == (max_num_tokens_padded + block_size - 1) // block_size");
  b.reference(fill(templates::moe_align, {{"E", std::to_string(k.num_experts)},
                                          {"BS", std::to_string(k.block_size)},
                                          {"K", std::to_string(k.top_k)}}));
  return b.build();
}

std::string name_of(const MoeAlignKernel& k) {
  return fmt::format("moe_align_block_size_e{}_k{}_bs{}", k.num_experts, k.top_k, k.block_size);
}

}  // namespace fib::onboard::gen
