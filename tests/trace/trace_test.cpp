// trace_from_json: statuses, which status needs correctness/performance, non-negative errors and
// latencies, non-finite errors as strings, solution/evaluation pairing, and the exact round trip
// of a full evaluation record.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "fib/trace/trace.h"
#include "trace_test_util.h"

namespace fib {
namespace {

using trace_test::HasError;
using trace_test::json;
using trace_test::kFile;
using trace_test::OnlyError;

// A full evaluation record; the evaluation's keys are deliberately not in schema order.
constexpr std::string_view kTrace = R"({
  "definition": "paged_decode_test",
  "workload": {"uuid": "w-1", "axes": {"batch_size": 3}, "inputs": {"q": {"type": "random"}}},
  "solution": "paged_decode_cuda_v1",
  "evaluation": {
    "status": "PASSED",
    "log": "built in 1.2 s",
    "environment": {
      "hardware": "NVIDIA H100 80GB HBM3",
      "libs": {"torch": "2.11.0", "flashinfer": "0.3.1", "cuda": "12.8"},
      "extra": {"host": "node-1", "timer": "cuda_event", "clocks": {"sm_mhz": 1980}}
    },
    "timestamp": "2025-01-02T03:04:05Z",
    "performance": {
      "reference_latency_ms": 1.25,
      "latency_ms": 0.5,
      "speedup_factor": 2.5,
      "profile": [{"kernel": "paged_decode", "ms": 0.4}],
      "extra": {"min": 0.48, "p10": 0.49, "p90": 0.55, "samples": 100}
    },
    "correctness": {
      "max_relative_error": 0.001,
      "max_absolute_error": 0.0025,
      "extra": {"matched_ratio": 1.0}
    }
  }
})";

std::optional<Trace> read(const Json& j, Diagnostics& diag) {
  ReadContext ctx{std::string(kFile), &diag};
  return trace_from_json(j, ctx);
}

class TraceTest : public ::testing::Test {
 protected:
  Json t_ = json(kTrace);
  Json& eval() { return t_["evaluation"]; }
};

TEST_F(TraceTest, FullEvaluationFields) {
  Diagnostics diag;
  auto t = read(t_, diag);
  ASSERT_TRUE(t) << diag.to_string();
  EXPECT_TRUE(diag.empty());
  EXPECT_EQ(t->definition, "paged_decode_test");
  EXPECT_EQ(t->solution, "paged_decode_cuda_v1");
  EXPECT_EQ(t->workload.uuid, "w-1");
  EXPECT_FALSE(t->is_workload_trace());
  EXPECT_TRUE(t->passed());
  ASSERT_TRUE(t->evaluation);
  const Evaluation& e = *t->evaluation;
  EXPECT_EQ(e.status, EvaluationStatus::kPassed);
  EXPECT_EQ(e.log, "built in 1.2 s");
  EXPECT_EQ(e.timestamp, "2025-01-02T03:04:05Z");
  EXPECT_EQ(e.environment.hardware, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(e.environment.libs,
            (std::vector<std::pair<std::string, std::string>>{
                {"torch", "2.11.0"}, {"flashinfer", "0.3.1"}, {"cuda", "12.8"}}));
  EXPECT_EQ(e.environment.extra["clocks"]["sm_mhz"], 1980);
  ASSERT_TRUE(e.correctness);
  EXPECT_DOUBLE_EQ(e.correctness->max_relative_error, 0.001);
  EXPECT_DOUBLE_EQ(e.correctness->max_absolute_error, 0.0025);
  EXPECT_EQ(e.correctness->extra["matched_ratio"], 1.0);
  ASSERT_TRUE(e.performance);
  EXPECT_DOUBLE_EQ(e.performance->latency_ms, 0.5);
  EXPECT_DOUBLE_EQ(e.performance->reference_latency_ms, 1.25);
  EXPECT_DOUBLE_EQ(e.performance->speedup_factor, 2.5);
  EXPECT_EQ(e.performance->profile.size(), 1u);
  EXPECT_EQ(e.performance->extra["samples"], 100);
}

TEST_F(TraceTest, FullEvaluationRoundTripsWithKeyOrderAndExtras) {
  Diagnostics diag;
  auto t = read(t_, diag);
  ASSERT_TRUE(t) << diag.to_string();
  EXPECT_EQ(to_json(*t).dump(), t_.dump());
}

TEST_F(TraceTest, WorkloadRecordWithNulls) {
  const Json j = json(R"({"definition": "d", "solution": null,
      "workload": {"uuid": "u", "axes": {}, "inputs": {}}, "evaluation": null})");
  Diagnostics diag;
  auto t = read(j, diag);
  ASSERT_TRUE(t) << diag.to_string();
  EXPECT_TRUE(t->is_workload_trace());
  EXPECT_FALSE(t->passed());
  EXPECT_EQ(to_json(*t).dump(), j.dump());
}

TEST_F(TraceTest, WorkloadRecordWithoutTheKeysIsWrittenWithNullsLikeUpstream) {
  const Json j =
      json(R"({"definition": "d", "workload": {"uuid": "u", "axes": {}, "inputs": {}}})");
  Diagnostics diag;
  auto t = read(j, diag);
  ASSERT_TRUE(t) << diag.to_string();
  EXPECT_TRUE(t->is_workload_trace());
  EXPECT_EQ(to_json(*t).dump(), json(R"({"definition": "d", "workload": {"uuid": "u", "axes": {},
      "inputs": {}}, "solution": null, "evaluation": null})")
                                    .dump());
}

// ------------------------------------------------------------------ status

TEST_F(TraceTest, UnknownStatusSuggests) {
  eval()["status"] = "PASS";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.evaluation.status", "unknown status 'PASS'", "did you mean 'PASSED'?"}));
}

TEST_F(TraceTest, StatusIsCaseSensitiveButSuggested) {
  eval()["status"] = "passed";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.evaluation.status", "unknown status 'passed'", "did you mean 'PASSED'?"}));
}

TEST_F(TraceTest, UnknownStatusWithNothingClose) {
  eval()["status"] = "OK";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.evaluation.status", "unknown status 'OK'",
                               "expected one of: PASSED, INCORRECT_SHAPE, INCORRECT_NUMERICAL, "
                               "INCORRECT_DTYPE, RUNTIME_ERROR, COMPILE_ERROR, TIMEOUT"}));
}

TEST(EvaluationStatus, NamesRoundTrip) {
  const char* names[] = {"PASSED",          "INCORRECT_SHAPE", "INCORRECT_NUMERICAL",
                         "INCORRECT_DTYPE", "RUNTIME_ERROR",   "COMPILE_ERROR",
                         "TIMEOUT"};
  ASSERT_EQ(std::size(kAllStatuses), std::size(names));
  for (std::size_t i = 0; i < std::size(names); ++i) {
    EXPECT_EQ(status_name(kAllStatuses[i]), names[i]);
    EXPECT_EQ(parse_status(names[i]), kAllStatuses[i]);
  }
  EXPECT_EQ(parse_status("passed"), std::nullopt);
  EXPECT_EQ(parse_status(""), std::nullopt);
}

TEST_F(TraceTest, PassedWithoutCorrectness) {
  eval().erase("correctness");
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.evaluation", "status PASSED requires 'correctness'"}));
}

TEST_F(TraceTest, PassedWithNullCorrectness) {
  eval()["correctness"] = nullptr;
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.evaluation", "status PASSED requires 'correctness'"}));
}

TEST_F(TraceTest, PassedWithoutPerformance) {
  eval().erase("performance");
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.evaluation", "status PASSED requires 'performance'"}));
}

TEST_F(TraceTest, IncorrectNumericalWithPerformance) {
  eval()["status"] = "INCORRECT_NUMERICAL";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.evaluation.performance",
                               "status INCORRECT_NUMERICAL must not carry 'performance'"}));
}

TEST_F(TraceTest, IncorrectNumericalWithoutCorrectness) {
  eval()["status"] = "INCORRECT_NUMERICAL";
  eval().erase("performance");
  eval().erase("correctness");
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.evaluation", "status INCORRECT_NUMERICAL requires 'correctness'"}));
}

TEST_F(TraceTest, IncorrectNumericalWithCorrectnessOnly) {
  eval()["status"] = "INCORRECT_NUMERICAL";
  eval().erase("performance");
  Diagnostics diag;
  auto t = read(t_, diag);
  ASSERT_TRUE(t) << diag.to_string();
  EXPECT_FALSE(t->passed());
  EXPECT_TRUE(t->evaluation->correctness);
  EXPECT_FALSE(t->evaluation->performance);
  // Written like upstream's pydantic dump: an absent performance comes back as null.
  Json expected = t_;
  expected["evaluation"]["performance"] = nullptr;
  EXPECT_EQ(to_json(*t).dump(), expected.dump());
}

TEST_F(TraceTest, RuntimeErrorWithCorrectness) {
  eval()["status"] = "RUNTIME_ERROR";
  eval().erase("performance");
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.evaluation.correctness", "status RUNTIME_ERROR must not carry 'correctness'"}));
}

TEST_F(TraceTest, RuntimeErrorWithBoth) {
  eval()["status"] = "RUNTIME_ERROR";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_EQ(diag.size(), 2u) << diag.to_string();
  EXPECT_TRUE(HasError(
      diag, {"$.evaluation.correctness", "status RUNTIME_ERROR must not carry 'correctness'"}));
  EXPECT_TRUE(HasError(
      diag, {"$.evaluation.performance", "status RUNTIME_ERROR must not carry 'performance'"}));
}

class FailureStatus : public ::testing::TestWithParam<const char*> {};

TEST_P(FailureStatus, CarriesNeitherCorrectnessNorPerformance) {
  Json t = json(kTrace);
  t["evaluation"]["status"] = GetParam();
  t["evaluation"].erase("correctness");
  t["evaluation"].erase("performance");
  Diagnostics diag;
  auto tr = read(t, diag);
  ASSERT_TRUE(tr) << diag.to_string();
  EXPECT_EQ(status_name(tr->evaluation->status), GetParam());
  EXPECT_FALSE(tr->passed());
  // Written like upstream's pydantic dump: absent correctness and performance come back as null.
  Json expected = t;
  expected["evaluation"]["correctness"] = nullptr;
  expected["evaluation"]["performance"] = nullptr;
  EXPECT_EQ(to_json(*tr).dump(), expected.dump());
  // ... and that form reads back to the same trace.
  Diagnostics again;
  auto tr2 = read(expected, again);
  ASSERT_TRUE(tr2) << again.to_string();
  EXPECT_EQ(to_json(*tr2).dump(), expected.dump());
}

INSTANTIATE_TEST_SUITE_P(Statuses, FailureStatus,
                         ::testing::Values("INCORRECT_SHAPE", "INCORRECT_DTYPE", "RUNTIME_ERROR",
                                           "COMPILE_ERROR", "TIMEOUT"));

// ------------------------------------------------------------------ numbers

TEST_F(TraceTest, NegativeLatency) {
  eval()["performance"]["latency_ms"] = -0.5;
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.evaluation.performance.latency_ms", "must be >= 0, found -0.5"}));
}

TEST_F(TraceTest, NegativeSpeedup) {
  eval()["performance"]["speedup_factor"] = -2;
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.evaluation.performance.speedup_factor", "must be >= 0, found -2"}));
}

TEST_F(TraceTest, LatencyMayNotBeNaN) {
  eval()["performance"]["reference_latency_ms"] = "NaN";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.evaluation.performance.reference_latency_ms",
                               "expected a number, found string \"NaN\""}));
}

TEST_F(TraceTest, NegativeMaxError) {
  eval()["correctness"]["max_absolute_error"] = -1;
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.evaluation.correctness.max_absolute_error", "must be >= 0 or NaN, found -1"}));
}

TEST_F(TraceTest, NegativeInfiniteMaxError) {
  eval()["correctness"]["max_relative_error"] = "-Infinity";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.evaluation.correctness.max_relative_error", "must be >= 0 or NaN, found -inf"}));
}

TEST_F(TraceTest, MaxErrorAsAnUnknownString) {
  eval()["correctness"]["max_relative_error"] = "Inf";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.evaluation.correctness.max_relative_error",
                               "expected a number (or \"NaN\", \"Infinity\"), found string "
                               "\"Inf\""}));
}

TEST_F(TraceTest, NonFiniteMaxErrorsAreReadAndWrittenBackAsStrings) {
  eval()["status"] = "INCORRECT_NUMERICAL";
  eval().erase("performance");
  eval()["correctness"]["max_relative_error"] = "NaN";
  eval()["correctness"]["max_absolute_error"] = "Infinity";
  Diagnostics diag;
  auto t = read(t_, diag);
  ASSERT_TRUE(t) << diag.to_string();
  EXPECT_TRUE(std::isnan(t->evaluation->correctness->max_relative_error));
  EXPECT_TRUE(std::isinf(t->evaluation->correctness->max_absolute_error));
  EXPECT_GT(t->evaluation->correctness->max_absolute_error, 0);
  const Json out = to_json(*t);
  EXPECT_EQ(out["evaluation"]["correctness"]["max_relative_error"], "NaN");
  EXPECT_EQ(out["evaluation"]["correctness"]["max_absolute_error"], "Infinity");
  Json expected = t_;
  expected["evaluation"]["performance"] = nullptr;  // upstream writes the absent one as null
  EXPECT_EQ(out.dump(), expected.dump());
}

// ------------------------------------------------------------------ pairing and structure

TEST_F(TraceTest, SolutionWithoutEvaluation) {
  t_.erase("evaluation");
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$", "a trace with a solution needs an evaluation"}));
}

TEST_F(TraceTest, EvaluationWithoutSolution) {
  t_["solution"] = nullptr;
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$", "a trace with an evaluation needs a solution"}));
}

TEST_F(TraceTest, MissingRequiredEvaluationFields) {
  eval().erase("timestamp");
  eval()["environment"].erase("hardware");
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_EQ(diag.size(), 2u) << diag.to_string();
  EXPECT_TRUE(HasError(diag, {"$.evaluation", "missing required field 'timestamp'"}));
  EXPECT_TRUE(HasError(diag, {"$.evaluation.environment", "missing required field 'hardware'"}));
}

TEST_F(TraceTest, ExtraMustBeAnObject) {
  eval()["correctness"]["extra"] = json("[1]");
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.evaluation.correctness.extra", "expected an object, found array"}));
}

TEST_F(TraceTest, ProfileMustBeAnArray) {
  eval()["performance"]["profile"] = Json::object();
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.evaluation.performance.profile", "expected an array, found object"}));
}

TEST_F(TraceTest, LibraryVersionMustBeAString) {
  eval()["environment"]["libs"]["torch"] = 2.11;
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.evaluation.environment.libs.torch", "expected a string, found number 2.11"}));
}

TEST_F(TraceTest, WorkloadFindingsCarryTheWorkloadPath) {
  t_["workload"]["inputs"]["q"]["type"] = "randon";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.workload.inputs.q.type", "unknown input type 'randon'", "did you mean 'random'?"}));
}

TEST_F(TraceTest, UnknownTopLevelField) {
  t_["workloads"] = t_["workload"];
  t_.erase("workload");
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_EQ(diag.size(), 2u) << diag.to_string();
  EXPECT_TRUE(
      HasError(diag, {"$.workloads", "unknown field 'workloads'", "did you mean 'workload'?"}));
  EXPECT_TRUE(HasError(diag, {"$", "missing required field 'workload'"}));
}

TEST_F(TraceTest, EmptySolutionName) {
  t_["solution"] = "";
  Diagnostics diag;
  EXPECT_FALSE(read(t_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.solution", "expected a non-empty string, found \"\""}));
}

}  // namespace
}  // namespace fib
