// op_type hadamard: hadamard_transform_d{D}, the rotation NSA's indexer applies to its query and
// key rows before the FP8 logits (sgl-kernel's hadamard_transform with scale dim^-1/2).
#include <fmt/format.h>

#include <cmath>

#include "onboard/generators/common.h"
#include "onboard/generators/families.h"
#include "onboard/generators/templates.h"

namespace fib::onboard::gen {

Definition hadamard_transform(const HadamardKernel& k, const GenContext& ctx) {
  const double scale = std::pow(static_cast<double>(k.dim), -0.5);  // Python's dim ** -0.5
  std::string description = fmt::format(
      "Hadamard transform of each row: out = (x @ H) * {}, H the {}x{} Sylvester Hadamard "
      "matrix (H[i, j] = (-1)^popcount(i & j)) and the scale dim^-1/2, in fp32 and rounded once. "
      "NSA's indexer rotates its query (tokens x index heads rows) and key (one row a token) with "
      "it. {}",
      py_float(scale), k.dim, k.dim, provenance(ctx));
  Builder b(name_of(k), "hadamard", std::move(description));
  b.tag(std::string(kStatusTag)).tag(model_tag(ctx));
  b.var("num_tokens", "Rows: tokens (the key) or tokens x index heads (the query).")
      .constant("dim", k.dim, "Row width, a power of two.");
  b.input("x", {"num_tokens", "dim"}, DType::kBFloat16, "Rows to rotate.");
  b.output("output", {"num_tokens", "dim"}, DType::kBFloat16, "The rotated rows.");
  b.reference(fill(templates::hadamard_transform,
                   {{"D", std::to_string(k.dim)}, {"SCALE", py_float(scale)}}));
  return b.build();
}

std::string name_of(const HadamardKernel& k) {
  return fmt::format("hadamard_transform_d{}", k.dim);
}

}  // namespace fib::onboard::gen
