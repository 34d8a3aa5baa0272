#include "judge.h"

#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <limits>
#include <thread>

#include "fib/bench/eval/compare.h"
#include "fib/bench/eval/op_family.h"
#include "fib/bench/inputs/device_pool.h"
#include "fib/bench/run/test_hooks.h"
#include "fib/tensor/safetensors.h"

namespace fib::bench::detail {

namespace {
Outputs read_outputs(const std::string& path) {
  Outputs out;
  const SafetensorsFile f = SafetensorsFile::open(path);
  for (const auto& k : f.keys()) out.emplace(k, f.read(k));
  return out;
}

// What a solution worker wrote, read into *out; false with *verdict a RUNTIME_ERROR when it
// cannot be read (a file the box refused to take is gone): that evaluation fails, never the
// run. With the pen switched off for a test, the error goes up as it did before.
bool read_solution_outputs(const std::string& path, Outputs* out, CallVerdict* verdict) {
  try {
    *out = read_outputs(path);
    return true;
  } catch (const Error& e) {
    if (test_hooks::pen().follow_links_out_of_the_box) throw;
    verdict->status = EvaluationStatus::kRuntimeError;
    verdict->log = fmt::format("fib cannot read the solution's outputs: {}", e.what());
    return false;
  }
}

// The worker stacks draws as [draws, batch]; check_sampling wants [batch, draws].
Tensor draws_by_row(const Tensor& stacked) {
  if (stacked.rank() != 2) return stacked;
  const std::int64_t draws = stacked.dim(0), batch = stacked.dim(1);
  Tensor t(stacked.dtype(), Shape{batch, draws});
  for (std::int64_t d = 0; d < draws; ++d) {
    for (std::int64_t b = 0; b < batch; ++b) t.set(b * draws + d, stacked.get(d * batch + b));
  }
  return t;
}

}  // namespace

Judgement judge(const Definition& def, const EvalConfigFile& builtin, const EvalConfigFile* user,
                const EvalSettings& cli, const std::vector<CheckedCall>& calls,
                const std::optional<SamplingDraws>& sampling) {
  const EvalPolicy policy = policy_for(def);
  const OutputEvals evals = resolve_eval_outputs(builtin, user, cli, def);
  const ResolvedEval whole = resolve_eval(builtin, user, cli, def, "");
  std::vector<TrialVerdict> verdicts(calls.size());

  // One checked call: its outputs and the reference's read from their files and compared.
  auto judge_call = [&](const CheckedCall& c, TrialVerdict& tv) {
    Outputs expected = read_outputs(c.reference_outputs);
    tv.trial = c.trial;
    tv.seed = c.seed;
    Outputs read;
    if (!c.solution_values && !read_solution_outputs(c.solution_outputs, &read, &tv.verdict)) {
      return;
    }
    const Outputs& got = c.solution_values ? *c.solution_values : read;
    if (policy.kind == PolicyKind::kSampling) {
      SamplingExpectation e = take_sampling_expectation(expected);
      const std::string& name = def.outputs.front().name;
      auto it = got.find(name);
      if (it == got.end()) {
        tv.verdict.status = EvaluationStatus::kIncorrectShape;
        tv.verdict.log = fmt::format("output '{}' is missing", name);
      } else {
        tv.verdict = check_sampling(def, evals.at(name), e, it->second);
      }
      return;
    }
    PoisonValues poison;
    for (const auto& spec : def.outputs) {
      if (c.poison.contains(spec.name)) {
        poison[spec.name] = c.poison[spec.name].get<double>();
      } else if (dtype_is_float(spec.dtype) && spec.dtype != DType::kFloat4E2M1) {
        poison[spec.name] = std::numeric_limits<double>::quiet_NaN();
      }
    }
    CompareOptions opt;
    opt.poison = &poison;
    std::optional<reference::Arguments> args;
    std::optional<RowScorer> scorer;
    if (policy.kind == PolicyKind::kTopkSet && !c.inputs.empty()) {
      args = input_set_on_host(c.inputs, c.set, c.pool.count > 0 ? c.pool.first : 0, c.pool.seed);
      // No scorer for the definition: sets must match exactly.
      if (const auto make = op_family(def).row_scorer) scorer = make(def, *args);
      if (scorer) opt.scorer = &*scorer;
    }
    tv.verdict = compare_outputs(def, policy, evals, expected, got, opt);
  };
  if (calls.size() < 2) {
    for (std::size_t i = 0; i < calls.size(); ++i) judge_call(calls[i], verdicts[i]);
  } else {
    // Trials are independent: judged side by side (large outputs take a few hundred ms each to
    // read and compare, and no timed call runs meanwhile).
    std::vector<std::exception_ptr> errors(calls.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < calls.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          judge_call(calls[i], verdicts[i]);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }
  if (sampling && policy.kind == PolicyKind::kSampling) {
    Outputs expected = read_outputs(sampling->reference_outputs);
    const SamplingExpectation expectation = take_sampling_expectation(expected);
    Outputs draws;
    const std::string& name = def.outputs.front().name;
    TrialVerdict tv;
    tv.trial = static_cast<int>(calls.size());
    tv.seed = sampling->seed;
    if (!read_solution_outputs(sampling->draws, &draws, &tv.verdict)) {
      // tv.verdict says why
    } else if (!draws.contains(name)) {
      tv.verdict.status = EvaluationStatus::kIncorrectShape;
      tv.verdict.log = fmt::format("the sampling draws hold no output '{}'", name);
    } else {
      tv.verdict = check_sampling(def, whole, expectation, draws_by_row(draws.at(name)));
    }
    if (!tv.verdict.passed() && draws.contains(name)) {
      tv.verdict.log = fmt::format(
          "distribution check over {} draws per row on trial 0's "
          "inputs:\n{}",
          draws.at(name).rank() > 0 ? draws.at(name).dim(0) : 0, tv.verdict.log);
    }
    verdicts.push_back(std::move(tv));
  }
  Judgement j;
  if (verdicts.empty()) {
    j.status = EvaluationStatus::kRuntimeError;
    j.log = "no checked call completed";
    return j;
  }
  const CallVerdict merged = merge_trials(verdicts);
  j.status = merged.status;
  if (j.status == EvaluationStatus::kPassed || j.status == EvaluationStatus::kIncorrectNumerical) {
    j.correctness = to_correctness(merged);
  }
  j.log = merged.log;
  return j;
}

}  // namespace fib::bench::detail
