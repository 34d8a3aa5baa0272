// op_type bmm: batched GEMM, C[b] = A[b] @ B[b] in bf16 (FlashInfer's bmm_bf16 interface with
// the batch a constant): MLA's weight absorption, one product per head of this rank, the
// tokens the M axis.
#include <fmt/format.h>

#include "fib/onboard/naming.h"
#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition bmm(const BmmKernel& k, const GenContext& ctx) {
  Builder b(definition_name(KernelSpec{k}), "bmm",
            fmt::format("Batched GEMM C[b] = A[b] @ B[b] over {} batch entries ({}), bf16 with "
                        "fp32 accumulation. {}",
                        k.batch, k.role, provenance(ctx, fmt::format("TP={}", k.tp))));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx)).tag("fi_api:flashinfer.gemm.bmm_bf16");
  if (k.tp > 1) b.tag(fmt::format("tp:{}", k.tp));
  b.constant("batch", k.batch, "Batch entries: the heads of one rank")
      .var("M", "Rows of each product: the tokens")
      .constant("N", k.n, "Columns of each product")
      .constant("K", k.k, "Inner dimension");
  b.input("A", {"batch", "M", "K"}, DType::kBFloat16, "Left operands");
  b.input("B", {"batch", "K", "N"}, DType::kBFloat16, "Right operands (per-head weights)");
  b.output("C", {"batch", "M", "N"}, DType::kBFloat16, "Products");
  b.reference(fill(templates::bmm, {{"BATCH", std::to_string(k.batch)},
                                    {"N", std::to_string(k.n)},
                                    {"K", std::to_string(k.k)}}));
  return b.build();
}

std::string name_of(const BmmKernel& k) {
  return fmt::format("bmm_bf16_b{}_n{}_k{}", k.batch, k.n, k.k);
}

}  // namespace fib::onboard::gen
