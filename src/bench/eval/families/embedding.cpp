// embedding (a gather of table rows): elementwise within the default tolerances (the rows are
// copied, so any difference is a wrong row). A call reads its ids and only the rows they name,
// and writes the output: ids + 2 * num_tokens * hidden_size elements are the roofline's demand.
#include "families/families.h"

namespace fib::bench::families {

namespace {
RooflineDemand roofline(const Definition& def, const AxisValues& bound) {
  RooflineDemand d;
  const auto t = axis_value(bound, "num_tokens"), h = axis_value(bound, "hidden_size");
  const TensorSpec* ids = def.input("input_ids");
  const TensorSpec* out = def.output("output");
  if (!t || !h || !ids || !out) return d;
  const auto tokens = static_cast<std::uint64_t>(*t);
  const auto rows = tokens * static_cast<std::uint64_t>(*h);
  d.bytes = static_cast<double>(dtype_storage_bytes(ids->dtype, tokens).value_or(0) +
                                2 * dtype_storage_bytes(out->dtype, rows).value_or(0));
  return d;
}
}  // namespace

const OpFamily& embedding() {
  static const OpFamily f{.op_type = "embedding",
                          .policy = elementwise_policy,
                          .builtin_eval = no_builtin_eval,
                          .roofline = roofline};
  return f;
}

}  // namespace fib::bench::families
