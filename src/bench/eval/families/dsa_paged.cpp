// dsa_paged holds two interfaces, told apart by the definition's outputs (dsa_interface: the
// indexer returns integer indices, sparse attention only floating outputs):
// - the top-k indexer: its index outputs are compared row by row as sets, a tie broken the other
//   way passing when the indexer's own score (dsa_topk_indexer_scorer) says the picks are equal;
// - sparse attention: elementwise, and a solution may leave out `lse`.
// No roofline demand: a call reads only the pages (or the selected tokens) it needs.
#include "families/families.h"

namespace fib::bench::families {

namespace {
EvalPolicy policy(const Definition& def) {
  EvalPolicy p;
  if (dsa_interface(def) == DsaInterface::kTopkIndexer) {
    p.kind = PolicyKind::kTopkSet;
    for (const auto& o : def.outputs)
      if (dtype_is_integer(o.dtype)) p.set_outputs.push_back(o.name);
  } else if (def.output("lse") != nullptr) {
    p.optional_outputs.push_back("lse");
  }
  return p;
}

// When two top-k picks count as tied.
EvalSettings builtin_eval() {
  EvalSettings s;
  s.extra["topk_score_rtol"] = 1e-2;
  s.extra["topk_score_atol"] = 1e-6;
  return s;
}

std::optional<RowScorer> row_scorer(const Definition& def, const reference::Arguments& args) {
  if (dsa_interface(def) != DsaInterface::kTopkIndexer) return std::nullopt;
  try {
    return dsa_topk_indexer_scorer(def, args);
  } catch (const Error&) {
    return std::nullopt;  // inputs it cannot score: sets must match exactly
  }
}
}  // namespace

const OpFamily& dsa_paged() {
  static const OpFamily f{.op_type = "dsa_paged",
                          .policy = policy,
                          .builtin_eval = builtin_eval,
                          .row_scorer = row_scorer};
  return f;
}

}  // namespace fib::bench::families
