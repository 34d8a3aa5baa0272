// page_append (rows copied into a paged cache): the new caches elementwise within the default
// tolerances (a copy, so any difference is a wrong or missed slot). A call reads the appended
// rows with their batch index and position and writes them into the cache: the row bytes twice
// and the two int32 indices per token are the roofline's demand (the rest of the cache is left
// where it is, not streamed).
#include "families/families.h"

namespace fib::bench::families {

namespace {

// Elements of one appended token's rows: K and V (GQA) or ckv and kpe (MLA).
std::uint64_t row_elements(const AxisValues& bound) {
  if (auto c = axis_value(bound, "head_dim_ckv"))
    return static_cast<std::uint64_t>(*c + axis_value(bound, "head_dim_kpe").value_or(0));
  const auto h = axis_value(bound, "num_kv_heads"), d = axis_value(bound, "head_dim");
  return h && d ? 2 * static_cast<std::uint64_t>(*h * *d) : 0;
}

RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  const auto nnz = axis_value(bound, "nnz_kv");
  const TensorSpec* first = def.inputs.empty() ? nullptr : &def.inputs.front();
  if (!nnz || !first) return d;
  const auto tokens = static_cast<std::uint64_t>(*nnz);
  const auto rows = tokens * row_elements(bound);
  d.bytes = static_cast<double>(2 * dtype_storage_bytes(first->dtype, rows).value_or(0) +
                                dtype_storage_bytes(DType::kInt32, 2 * tokens).value_or(0));
  return d;
}

}  // namespace

const OpFamily& page_append() {
  static const OpFamily f{.op_type = "page_append",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
