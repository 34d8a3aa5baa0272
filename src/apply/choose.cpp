// build_table: screens each evaluation trace (trust, solution digest, status, tolerance), then
// picks per definition and axes the fastest eligible solution, and the fallback over all axes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "apply/artifacts.h"
#include "fib/apply/table.h"
#include "fib/apply/test_hooks.h"
#include "fib/trace/solution_digest.h"

namespace fib::apply {

namespace {

struct Aggregate {
  double latency_sum = 0;
  double speedup_sum = 0;
  std::size_t traces = 0;
  double latency() const { return latency_sum / static_cast<double>(traces); }
  double speedup() const { return speedup_sum / static_cast<double>(traces); }
};

// What the screened traces of one solution on one definition say.
struct SolutionState {
  const Record<Solution>* record = nullptr;
  std::string digest;
  std::vector<std::string> build_keys;
  bool failed = false;
  std::set<AxisValues> failed_axes;
  std::map<AxisValues, Aggregate> passed;
};

AxisValues sorted_axes(const Workload& w) {
  AxisValues a = w.axes;
  std::sort(a.begin(), a.end());
  return a;
}

const Json* extra_field(const Trace& t, std::string_view key) {
  const Json& extra = t.evaluation->environment.extra;
  if (!extra.is_object()) return nullptr;
  const auto it = extra.find(std::string(key));
  return it == extra.end() ? nullptr : &*it;
}

// A recorded error: a number, or "Infinity"/"NaN" as fib writes non-finite ones (never within a
// limit).
double recorded_error(const Json& j) {
  return j.is_number() ? j.get<double>() : std::numeric_limits<double>::infinity();
}

bool within(double value, const std::optional<double>& limit) {
  return !limit || value <= *limit;  // NaN is within no limit
}

bool within_tolerance(const Trace& t, const ApplyOptions& o) {
  const Correctness& c = *t.evaluation->correctness;
  if (!within(c.max_absolute_error, o.max_abs_error)) return false;
  if (!within(c.max_relative_error, o.max_rel_error)) return false;
  // A trace without an NMSE (integer outputs, sampling, top-k sets) is not judged by it.
  if (c.extra.is_object()) {
    const auto it = c.extra.find("nmse");
    if (it != c.extra.end() && !it->is_null() && !within(recorded_error(*it), o.max_nmse)) {
      return false;
    }
  }
  return true;
}

void remember_build_key(const Trace& t, SolutionState& state) {
  const Json* build = extra_field(t, "build");
  if (build == nullptr || !build->is_object()) return;
  const auto key = build->find("key");
  if (key == build->end() || !key->is_string()) return;
  const std::string k = key->get<std::string>();
  if (std::find(state.build_keys.begin(), state.build_keys.end(), k) == state.build_keys.end()) {
    state.build_keys.push_back(k);
  }
}

// Who may vouch for the trace and whether it is about the record in the dataset.
std::optional<SkipReason> screen_origin(const Trace& t, const TraceSet& set, const Definition& def,
                                        const ApplyOptions& o,
                                        std::map<std::string, SolutionState>& states) {
  if (t.signer.empty()) return SkipReason::kUnsigned;
  if (!o.trusted.contains(t.signer)) return SkipReason::kUntrusted;
  const Record<Solution>* rec = set.solution(*t.solution);
  if (rec == nullptr || rec->value.definition != def.name) return SkipReason::kUnknownSolution;
  SolutionState& state = states[rec->value.name];
  if (state.record == nullptr) {
    state.record = rec;
    state.digest = solution_digest(rec->value);
  }
  if (test_hooks::digest_check()) {
    const Json* digest = extra_field(t, kSolutionDigestField);
    if (digest == nullptr || !digest->is_string()) return SkipReason::kNoDigest;
    if (digest->get<std::string>() != state.digest) return SkipReason::kDigestMismatch;
  }
  return std::nullopt;
}

std::optional<SkipReason> screen(const Trace& t, const TraceSet& set, const Definition& def,
                                 const ApplyOptions& o,
                                 std::map<std::string, SolutionState>& states) {
  if (auto why = screen_origin(t, set, def, o, states)) return why;
  SolutionState& state = states[*t.solution];
  remember_build_key(t, state);
  const AxisValues axes = sorted_axes(t.workload);
  if (!t.passed()) {
    state.failed = true;
    state.failed_axes.insert(axes);
    return SkipReason::kNotPassed;
  }
  if (!within_tolerance(t, o)) return SkipReason::kOverTolerance;
  const Performance& p = *t.evaluation->performance;
  if (!(p.latency_ms > 0) || !std::isfinite(p.latency_ms)) return SkipReason::kNoLatency;
  Aggregate& a = state.passed[axes];
  a.latency_sum += p.latency_ms;
  a.speedup_sum += std::isfinite(p.speedup_factor) ? p.speedup_factor : 0.0;
  ++a.traces;
  return std::nullopt;
}

struct Candidate {
  std::string solution;
  Aggregate aggregate;
};

// The eligible (solution, aggregate) pairs per axes; excluded traces counted in `table`.
std::map<AxisValues, std::vector<Candidate>> candidates(
    const std::map<std::string, SolutionState>& states, const ApplyOptions& o, ApplyTable& table,
    DefinitionTable& out) {
  std::map<AxisValues, std::vector<Candidate>> by_axes;
  for (const auto& [name, state] : states) {
    if (state.failed && !o.allow_failed_solutions) out.excluded_solutions.push_back(name);
    for (const auto& [axes, a] : state.passed) {
      const bool excluded =
          state.failed && (!o.allow_failed_solutions || state.failed_axes.count(axes) != 0);
      if (excluded) {
        table.skipped[static_cast<std::size_t>(SkipReason::kSolutionExcluded)] += a.traces;
        continue;
      }
      table.traces_used += a.traces;
      by_axes[axes].push_back({name, a});
    }
  }
  return by_axes;
}

// Faster first; equal latencies by name, so the choice never depends on load order.
bool faster(const Candidate& a, const Candidate& b) {
  if (a.aggregate.latency() != b.aggregate.latency()) {
    return a.aggregate.latency() < b.aggregate.latency();
  }
  return a.solution < b.solution;
}

Choice make_choice(const SolutionState& state, const TraceSet& set, const ApplyOptions& o) {
  const Solution& s = state.record->value;
  Choice c;
  c.solution = s.name;
  c.language = s.spec.language;
  if (!detail::python_language(s.spec.language)) c.binding = s.spec.binding_or_default();
  c.entry_point = s.spec.entry_point;
  c.destination_passing_style = s.spec.dps();
  c.digest = state.digest;
  c.solution_file = std::filesystem::absolute(set.root() / set.where(state.record->source));
  c.build_keys = state.build_keys;
  c.artifact = detail::find_artifact(c, o.build_cache);
  return c;
}

// The solution winning the most axes; then the highest mean speedup over every axes it is
// eligible on; then by name.
std::optional<Fallback> choose_fallback(
    const DefinitionTable& d, const std::map<AxisValues, std::vector<Candidate>>& by_axes) {
  std::map<std::string, std::size_t> wins;
  for (const Entry& e : d.entries) ++wins[e.choice.solution];
  std::map<std::string, Aggregate> overall;
  for (const auto& [axes, list] : by_axes) {
    for (const Candidate& c : list) {
      Aggregate& a = overall[c.solution];
      a.speedup_sum += c.aggregate.speedup();
      ++a.traces;
    }
  }
  std::optional<Fallback> best;
  for (const Entry& e : d.entries) {
    const std::string& name = e.choice.solution;
    Fallback f{e.choice, wins[name], overall[name].speedup()};
    const bool better = !best || f.axes_won > best->axes_won ||
                        (f.axes_won == best->axes_won &&
                         (f.speedup > best->speedup ||
                          (f.speedup == best->speedup && name < best->choice.solution)));
    if (better) best = std::move(f);
  }
  return best;
}

std::optional<DefinitionTable> choose(const Definition& def, const TraceSet& set,
                                      const ApplyOptions& o, ApplyTable& table) {
  std::map<std::string, SolutionState> states;
  for (const Record<Trace>& r : set.traces(def.name)) {
    const Trace& t = r.value;
    if (!t.evaluation || !t.solution) continue;
    ++table.traces_considered;
    if (auto why = screen(t, set, def, o, states)) {
      ++table.skipped[static_cast<std::size_t>(*why)];
    }
  }
  DefinitionTable out;
  out.op_type = def.op_type;
  out.var_axes = def.var_axes();
  const auto by_axes = candidates(states, o, table, out);
  for (const auto& [axes, list] : by_axes) {
    const Candidate& best = *std::min_element(list.begin(), list.end(), faster);
    Entry e;
    e.axes = axes;
    e.choice = make_choice(states.at(best.solution), set, o);
    e.latency_ms = best.aggregate.latency();
    e.speedup = best.aggregate.speedup();
    e.traces = best.aggregate.traces;
    out.entries.push_back(std::move(e));
  }
  if (out.entries.empty() && out.excluded_solutions.empty()) return std::nullopt;
  if (o.fallback) out.fallback = choose_fallback(out, by_axes);
  return out;
}

}  // namespace

std::string_view skip_reason_name(SkipReason r) {
  static constexpr std::string_view kNames[kSkipReasons] = {
      "unsigned",   "untrusted",      "unknown_solution", "no_digest",        "digest_mismatch",
      "not_passed", "over_tolerance", "no_latency",       "solution_excluded"};
  return kNames[static_cast<std::size_t>(r)];
}

const Entry* ApplyTable::lookup(const std::string& definition, const AxisValues& axes) const {
  const auto d = definitions.find(definition);
  if (d == definitions.end()) return nullptr;
  AxisValues key = axes;
  std::sort(key.begin(), key.end());
  for (const Entry& e : d->second.entries) {
    if (e.axes == key) return &e;
  }
  return nullptr;
}

ApplyTable build_table(const TraceSet& set, const ApplyOptions& options) {
  ApplyTable table;
  table.dataset = std::filesystem::absolute(set.root());
  table.options = options;
  for (const Record<Definition>& d : set.definitions()) {
    if (auto t = choose(d.value, set, options, table)) {
      table.definitions.emplace(d.value.name, std::move(*t));
    }
  }
  return table;
}

}  // namespace fib::apply
