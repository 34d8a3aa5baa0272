// op_type gemm: C = A @ B.T in fp16, one definition per (N, K). Names use the full projection
// shape by default (the dataset's convention) or the per-rank shape with --gemm-shapes per-rank.
#include <fmt/format.h>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition gemm(const GemmKernel& k, const GenContext& ctx) {
  const std::string what = k.role.empty() ? std::string() : fmt::format(" {}", k.role);
  std::string description = fmt::format(
      "General matrix multiply (GEMM) C = A @ B.T for{} (N={}, K={}{}). {}", what, k.n, k.k,
      k.tp > 0 ? fmt::format(", per rank at TP={}", k.tp) : std::string(), provenance(ctx));
  Builder b(fmt::format("gemm_n{}_k{}", k.n, k.k), "gemm", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  if (k.tp > 0) b.tag(fmt::format("tp:{}", k.tp));
  b.var("M", "Number of rows of A (tokens).")
      .constant("N", k.n, "Output features.")
      .constant("K", k.k, "Input features (reduction dimension).");
  b.input("A", {"M", "K"}, DType::kFloat16, "Activations.")
      .input("B", {"N", "K"}, DType::kFloat16, "Weight, [out_features, in_features].");
  b.output("C", {"M", "N"}, DType::kFloat16, "A @ B.T.");
  b.reference(fill(templates::gemm, {{"N", std::to_string(k.n)}, {"K", std::to_string(k.k)}}));
  return b.build();
}

std::string name_of(const GemmKernel& k) { return fmt::format("gemm_n{}_k{}", k.n, k.k); }

}  // namespace fib::onboard::gen
