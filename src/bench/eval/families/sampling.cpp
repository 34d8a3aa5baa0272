// sampling (top_k / top_p / top_k_top_p / min_p from probabilities): the outputs are random draws,
// so each checked call's draws must lie in the reference's support, and many draws on one input set
// must follow its distribution (check_sampling). The reference side adds that distribution to
// its outputs for the judge. The renorm interfaces (top_k_renorm_probs, top_p_renorm_probs)
// return the filtered distribution: elementwise within the default tolerances.
#include "families/families.h"

namespace fib::bench::families {

namespace {
// top_k_renorm_probs / top_p_renorm_probs return the filtered distribution, not draws.
bool draws(const Definition& def) { return def.output("samples") != nullptr; }

EvalPolicy policy(const Definition& def) {
  EvalPolicy p;
  if (draws(def)) p.kind = PolicyKind::kSampling;
  return p;
}

EvalSettings builtin_eval() {
  EvalSettings s;
  s.extra["sampling_validation_trials"] = 100;
  s.extra["sampling_tvd_threshold"] = 0.2;
  s.extra["sampling_draws_per_row"] = 100000;
  s.extra["sampling_chi2_alpha"] = 1e-6;
  s.extra["sampling_top_p_epsilon"] = 1e-3;
  return s;
}

void reference_extras(const Definition& def, const reference::Arguments& args,
                      const Json& eval_extra, NamedTensors* outputs) {
  if (!draws(def)) return;
  ResolvedEval cfg;
  cfg.extra = eval_extra;
  SamplingExpectation e = sampling_expectation(def, args, cfg);
  outputs->emplace_back(kDistributionOutput, std::move(e.distribution));
  if (e.allowed.defined()) outputs->emplace_back(kAllowedOutput, std::move(e.allowed));
}
}  // namespace

const OpFamily& sampling() {
  static const OpFamily f{.op_type = "sampling",
                          .policy = policy,
                          .builtin_eval = builtin_eval,
                          .reference_extras = reference_extras,
                          .samples = draws};
  return f;
}

}  // namespace fib::bench::families
