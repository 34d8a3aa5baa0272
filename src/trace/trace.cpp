#include "fib/trace/trace.h"

#include <fmt/format.h>
#include <cmath>

#include "fib/trace/signature.h"
#include "fib/trace/suggest.h"

namespace fib {

namespace {

constexpr std::string_view kStatusNames[] = {
    "PASSED",        "INCORRECT_SHAPE", "INCORRECT_NUMERICAL", "INCORRECT_DTYPE", "RUNTIME_ERROR",
    "COMPILE_ERROR", "TIMEOUT"};
constexpr std::string_view kTraceFields[] = {"definition", "solution", "workload", "evaluation"};
enum { kDefinition, kSolution, kWorkload, kEvaluation };
constexpr std::string_view kEvalFields[] = {"status", "environment", "timestamp",
                                            "log",    "correctness", "performance"};
enum { kStatus, kEnv, kTimestamp, kLog, kCorrectness, kPerformance };
constexpr std::string_view kEnvFields[] = {"hardware", "libs", "extra"};
constexpr std::string_view kCorrFields[] = {"max_relative_error", "max_absolute_error", "extra"};
constexpr std::string_view kPerfFields[] = {"latency_ms", "reference_latency_ms", "speedup_factor",
                                            "profile", "extra"};

bool read_extra(const Json* v, const JsonPath& p, const ReadContext& ctx, Json& out) {
  if (v == nullptr || v->is_null()) return true;
  if (!v->is_object()) {
    ctx.error(p, fmt::format("expected an object, found {}", json_kind(*v)));
    return false;
  }
  out = *v;
  return true;
}

std::optional<Environment> read_env(const Json& j, const JsonPath& p, const ReadContext& ctx) {
  const Json* f[3];
  Environment e;
  if (!read_object(j, p, ctx, kEnvFields, f, &e.key_order)) return std::nullopt;
  bool ok = require_field(f[0], "hardware", p, ctx);
  if (f[0]) {
    if (auto v = read_string(*f[0], p.key("hardware"), ctx, false))
      e.hardware = *v;
    else
      ok = false;
  }
  if (f[1]) {
    const JsonPath lp = p.key("libs");
    if (!f[1]->is_object()) {
      ctx.error(
          lp, fmt::format("expected an object of library -> version, found {}", json_kind(*f[1])));
      ok = false;
    } else {
      for (auto it = f[1]->begin(); it != f[1]->end(); ++it) {
        if (auto v = read_string(it.value(), lp.key(it.key()), ctx))
          e.libs.emplace_back(it.key(), *v);
        else
          ok = false;
      }
    }
  }
  ok = read_extra(f[2], p.key("extra"), ctx, e.extra) && ok;
  if (!ok) return std::nullopt;
  return e;
}

bool read_nonneg(const Json* v, const JsonPath& p, const ReadContext& ctx, double& out,
                 bool allow_nan) {
  if (v == nullptr) return true;
  auto x = allow_nan ? read_extended_number(*v, p, ctx) : read_number(*v, p, ctx);
  if (!x) return false;
  if (std::isnan(*x) && !allow_nan) {
    ctx.error(p, "must be a number, found NaN");
    return false;
  }
  if (*x < 0) {
    ctx.error(p, fmt::format("must be >= 0{}, found {}", allow_nan ? " or NaN" : "", *x));
    return false;
  }
  out = *x;
  return true;
}

std::optional<Evaluation> read_eval(const Json& j, const JsonPath& p, const ReadContext& ctx) {
  const Json* f[6];
  Evaluation e;
  if (!read_object(j, p, ctx, kEvalFields, f, &e.key_order)) return std::nullopt;
  bool ok = true;
  for (int req : {kStatus, kEnv, kTimestamp})
    ok = require_field(f[req], kEvalFields[req], p, ctx) && ok;
  bool status_ok = false;
  if (f[kStatus]) {
    if (auto v = read_string(*f[kStatus], p.key("status"), ctx)) {
      if (auto s = parse_status(*v)) {
        e.status = *s;
        status_ok = true;
      } else {
        ctx.error(p.key("status"), fmt::format("unknown status '{}'", *v),
                  suggest(*v, kStatusNames));
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (f[kEnv]) {
    if (auto v = read_env(*f[kEnv], p.key("environment"), ctx))
      e.environment = std::move(*v);
    else
      ok = false;
  }
  if (f[kTimestamp]) {
    if (auto v = read_string(*f[kTimestamp], p.key("timestamp"), ctx, false))
      e.timestamp = *v;
    else
      ok = false;
  }
  if (f[kLog] && !f[kLog]->is_null()) {
    if (auto v = read_string(*f[kLog], p.key("log"), ctx))
      e.log = std::move(*v);
    else
      ok = false;
  }
  if (f[kCorrectness] && !f[kCorrectness]->is_null()) {
    const JsonPath cp = p.key("correctness");
    const Json* g[3];
    Correctness c;
    if (read_object(*f[kCorrectness], cp, ctx, kCorrFields, g, &c.key_order)) {
      bool cok = read_nonneg(g[0], cp.key("max_relative_error"), ctx, c.max_relative_error, true);
      cok = read_nonneg(g[1], cp.key("max_absolute_error"), ctx, c.max_absolute_error, true) && cok;
      cok = read_extra(g[2], cp.key("extra"), ctx, c.extra) && cok;
      if (cok)
        e.correctness = std::move(c);
      else
        ok = false;
    } else {
      ok = false;
    }
  }
  if (f[kPerformance] && !f[kPerformance]->is_null()) {
    const JsonPath pp = p.key("performance");
    const Json* g[5];
    Performance perf;
    if (read_object(*f[kPerformance], pp, ctx, kPerfFields, g, &perf.key_order)) {
      bool pok = read_nonneg(g[0], pp.key("latency_ms"), ctx, perf.latency_ms, false);
      pok = read_nonneg(g[1], pp.key("reference_latency_ms"), ctx, perf.reference_latency_ms,
                        false) &&
            pok;
      pok = read_nonneg(g[2], pp.key("speedup_factor"), ctx, perf.speedup_factor, false) && pok;
      if (g[3] && !g[3]->is_null()) {
        if (g[3]->is_array()) {
          perf.profile = *g[3];
        } else {
          ctx.error(pp.key("profile"),
                    fmt::format("expected an array, found {}", json_kind(*g[3])));
          pok = false;
        }
      }
      pok = read_extra(g[4], pp.key("extra"), ctx, perf.extra) && pok;
      if (pok)
        e.performance = std::move(perf);
      else
        ok = false;
    } else {
      ok = false;
    }
  }
  if (status_ok) {
    const std::string st(status_name(e.status));
    const bool need_corr =
        e.status == EvaluationStatus::kPassed || e.status == EvaluationStatus::kIncorrectNumerical;
    const bool need_perf = e.status == EvaluationStatus::kPassed;
    const bool has_corr = f[kCorrectness] && !f[kCorrectness]->is_null();
    const bool has_perf = f[kPerformance] && !f[kPerformance]->is_null();
    if (need_corr && !has_corr) {
      ctx.error(p, fmt::format("status {} requires 'correctness'", st));
      ok = false;
    } else if (!need_corr && has_corr) {
      ctx.error(p.key("correctness"), fmt::format("status {} must not carry 'correctness'", st));
      ok = false;
    }
    if (need_perf && !has_perf) {
      ctx.error(p, fmt::format("status {} requires 'performance'", st));
      ok = false;
    } else if (!need_perf && has_perf) {
      ctx.error(p.key("performance"), fmt::format("status {} must not carry 'performance'", st));
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return e;
}

Json env_json(const Environment& e) {
  Json v[3];
  v[0] = e.hardware;
  Json libs = Json::object();
  for (const auto& [k, x] : e.libs) libs[k] = x;
  v[1] = std::move(libs);
  v[2] = e.extra;
  static constexpr bool kAlways[] = {true, true, false};
  return write_object(kEnvFields, v, e.key_order, kAlways);
}

Json eval_json(const Evaluation& e) {
  Json v[6];
  v[kStatus] = std::string(status_name(e.status));
  v[kEnv] = env_json(e.environment);
  v[kTimestamp] = e.timestamp;
  v[kLog] = e.log;
  if (e.correctness) {
    Json g[3];
    g[0] = write_extended_number(e.correctness->max_relative_error);
    g[1] = write_extended_number(e.correctness->max_absolute_error);
    g[2] = e.correctness->extra;
    static constexpr bool kAlways[] = {true, true, false};
    v[kCorrectness] = write_object(kCorrFields, g, e.correctness->key_order, kAlways);
  }
  if (e.performance) {
    Json g[5];
    g[0] = e.performance->latency_ms;
    g[1] = e.performance->reference_latency_ms;
    g[2] = e.performance->speedup_factor;
    g[3] = e.performance->profile;
    g[4] = e.performance->extra;
    static constexpr bool kAlways[] = {true, true, true, false, false};
    v[kPerformance] = write_object(kPerfFields, g, e.performance->key_order, kAlways);
  }
  static constexpr bool kAlways[] = {true, true, true, true, true, true};
  return write_object(kEvalFields, v, e.key_order, kAlways);
}

}  // namespace

std::string_view status_name(EvaluationStatus s) { return kStatusNames[static_cast<int>(s)]; }

std::optional<EvaluationStatus> parse_status(std::string_view s) {
  for (std::size_t i = 0; i < std::size(kStatusNames); ++i) {
    if (kStatusNames[i] == s) return static_cast<EvaluationStatus>(i);
  }
  return std::nullopt;
}

std::optional<Trace> trace_from_json(const Json& j, const ReadContext& ctx) {
  const std::size_t errors_before = ctx.errors;
  const JsonPath root;
  const Json* f[4];
  Trace t;
  if (!read_object(j, root, ctx, kTraceFields, f, &t.key_order)) return std::nullopt;
  bool ok = require_field(f[kDefinition], "definition", root, ctx);
  ok = require_field(f[kWorkload], "workload", root, ctx) && ok;
  if (f[kDefinition]) {
    if (auto v = read_string(*f[kDefinition], root.key("definition"), ctx, false))
      t.definition = *v;
    else
      ok = false;
  }
  if (f[kSolution] && !f[kSolution]->is_null()) {
    if (auto v = read_string(*f[kSolution], root.key("solution"), ctx, false))
      t.solution = *v;
    else
      ok = false;
  }
  if (f[kWorkload]) {
    if (auto w = workload_from_json(*f[kWorkload], root.key("workload"), ctx))
      t.workload = std::move(*w);
    else
      ok = false;
  }
  if (f[kEvaluation] && !f[kEvaluation]->is_null()) {
    if (auto e = read_eval(*f[kEvaluation], root.key("evaluation"), ctx))
      t.evaluation = std::move(*e);
    else
      ok = false;
  }
  if (ok && t.solution.has_value() != t.evaluation.has_value()) {
    ctx.error(root, t.solution ? "a trace with a solution needs an evaluation"
                               : "a trace with an evaluation needs a solution");
    ok = false;
  }
  if (!ok || ctx.errors != errors_before) return std::nullopt;
  auto signer = verify_trace_signature(j, ctx);
  if (!signer) return std::nullopt;
  t.signer = std::move(*signer);
  return t;
}

Json to_json(const Trace& t) {
  Json v[4];
  v[kDefinition] = t.definition;
  if (t.solution) v[kSolution] = *t.solution;
  v[kWorkload] = to_json(t.workload);
  if (t.evaluation) v[kEvaluation] = eval_json(*t.evaluation);
  // Upstream writes "solution": null and "evaluation": null on workload records.
  static constexpr bool kAlways[] = {true, true, true, true};
  return write_object(kTraceFields, v, t.key_order, kAlways);
}

}  // namespace fib
