// TraceSet::with_traces: a copy with traces added through load()'s checks (a signature must
// verify), leaving the original as it was; TraceSet::without_traces: a copy of all but traces.
#include <gtest/gtest.h>

#include "fib/dataset/trace_set.h"
#include "fib/trace/signature.h"
#include "support/test_paths.h"

namespace fib {
namespace {

Trace runtime_error_trace(const TraceSet& set, const std::string& log) {
  Trace t;
  t.definition = "rmsnorm_h2048";
  t.workload = set.workloads("rmsnorm_h2048").at(0).value.workload;
  t.solution = "rmsnorm_h2048_naive";
  Evaluation e;
  e.status = EvaluationStatus::kRuntimeError;
  e.environment.hardware = "test-cpu";
  e.timestamp = "2026-11-28T00:00:00Z";
  e.log = log;
  t.evaluation = e;
  return t;
}

TEST(TraceSetWithTraces, AddsCheckedTracesToACopy) {
  const TraceSet set = TraceSet::load(fib::testing::source_dir() / "examples" / "dataset");
  const std::size_t count = set.trace_count();
  const SigningKey key = SigningKey::generate();
  Trace good = runtime_error_trace(set, "signed");
  sign_trace(good, key);
  Trace tampered = runtime_error_trace(set, "signed, then changed");
  sign_trace(tampered, key);
  tampered.evaluation->log = "changed after signing";
  const Trace unsigned_trace = runtime_error_trace(set, "unsigned");
  Trace workload_only = runtime_error_trace(set, "");
  workload_only.solution.reset();
  workload_only.evaluation.reset();

  Diagnostics diag;
  const std::vector<Trace> added = {good, tampered, unsigned_trace, workload_only};
  const TraceSet grown = set.with_traces(added, diag);
  EXPECT_EQ(set.trace_count(), count);  // the original is not changed
  ASSERT_EQ(grown.trace_count(), count + 2);
  const auto& list = grown.traces("rmsnorm_h2048");
  EXPECT_EQ(list[list.size() - 2].value.evaluation->log, "signed");
  EXPECT_EQ(list[list.size() - 2].value.signer, key.public_key().key_id());
  EXPECT_EQ(list.back().value.evaluation->log, "unsigned");
  EXPECT_TRUE(list.back().value.signer.empty());
  // The tampered signature and the workload record are refused, as load() refuses such lines.
  EXPECT_EQ(diag.count(Severity::kError), 2u) << diag.to_string();
  EXPECT_NE(diag.to_string().find("signature"), std::string::npos) << diag.to_string();
}

TEST(TraceSetWithTraces, WithoutTracesKeepsEverythingElse) {
  const TraceSet set = TraceSet::load(fib::testing::source_dir() / "examples" / "dataset");
  Diagnostics diag;
  const TraceSet grown = set.with_traces(std::vector<Trace>{runtime_error_trace(set, "x")}, diag);
  ASSERT_EQ(grown.trace_count(), set.trace_count() + 1);
  const TraceSet bare = grown.without_traces();
  EXPECT_EQ(bare.trace_count(), 0u);
  EXPECT_EQ(bare.definitions().size(), set.definitions().size());
  EXPECT_EQ(bare.workload_count(), set.workload_count());
  EXPECT_EQ(bare.solution_count(), set.solution_count());
  EXPECT_NE(bare.solution("rmsnorm_h2048_naive"), nullptr);
  EXPECT_EQ(bare.root(), set.root());
}

}  // namespace
}  // namespace fib
