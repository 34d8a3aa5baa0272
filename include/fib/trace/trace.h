// Trace: one evaluation of a solution on a workload (or, with no solution, a workload record),
// with the Evaluation (status, environment, correctness, performance) upstream defines.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fib/trace/json_reader.h"
#include "fib/trace/workload.h"

namespace fib {

enum class EvaluationStatus : std::uint8_t {
  kPassed,
  kIncorrectShape,
  kIncorrectNumerical,
  kIncorrectDtype,
  kRuntimeError,
  kCompileError,
  kTimeout,
};
inline constexpr EvaluationStatus kAllStatuses[] = {EvaluationStatus::kPassed,
                                                    EvaluationStatus::kIncorrectShape,
                                                    EvaluationStatus::kIncorrectNumerical,
                                                    EvaluationStatus::kIncorrectDtype,
                                                    EvaluationStatus::kRuntimeError,
                                                    EvaluationStatus::kCompileError,
                                                    EvaluationStatus::kTimeout};
std::string_view status_name(EvaluationStatus s);  // "PASSED", "INCORRECT_SHAPE", ...
std::optional<EvaluationStatus> parse_status(std::string_view s);

struct Environment {
  std::string hardware;
  std::vector<std::pair<std::string, std::string>> libs;
  Json extra;  // fib's additions (host, compiler, clocks, timer); null when absent
  KeyOrder key_order;
};

struct Correctness {
  double max_relative_error = 0;  // >= 0 or NaN
  double max_absolute_error = 0;
  Json extra;  // e.g. matched_ratio, first mismatch; null when absent
  KeyOrder key_order;
};

struct Performance {
  double latency_ms = 0;
  double reference_latency_ms = 0;
  double speedup_factor = 0;
  Json profile;  // upstream's per-kernel CUPTI records, kept as given
  Json extra;    // fib's timing detail (min, p10, p90, samples, timer); null when absent
  KeyOrder key_order;
};

struct Evaluation {
  EvaluationStatus status = EvaluationStatus::kPassed;
  Environment environment;
  std::string timestamp;
  std::string log;
  std::optional<Correctness> correctness;
  std::optional<Performance> performance;
  KeyOrder key_order;
};

struct Trace {
  std::string definition;
  Workload workload;
  std::optional<std::string> solution;
  std::optional<Evaluation> evaluation;
  KeyOrder key_order;
  // The key id of the fib signature the record carries and that verified (signature.h); empty
  // for an unsigned record. Not written: the signature itself stays in environment.extra.
  std::string signer;

  // A workload record: no solution and no evaluation.
  bool is_workload_trace() const { return !solution && !evaluation; }
  bool passed() const { return evaluation && evaluation->status == EvaluationStatus::kPassed; }
};

// Parses a trace (or workload) record. Checks field types, statuses, non-negative errors and
// latencies, and that correctness/performance are present exactly when the status calls for
// them (PASSED: both; INCORRECT_NUMERICAL: correctness only; otherwise neither). A record that
// carries a fib signature is refused unless the signature verifies (signature.h).
std::optional<Trace> trace_from_json(const Json& j, const ReadContext& ctx);
Json to_json(const Trace& t);

}  // namespace fib
