// TraceSet::with_traces: a copy with traces added through load()'s checks (a signature must
// verify), leaving the original as it was and sharing its records; TraceSet::without_traces: a
// copy of all but traces. Snapshots made from one another stay as they were, also while other
// threads read them.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

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

std::vector<Trace> numbered_traces(const TraceSet& set, const std::string& prefix, int n) {
  std::vector<Trace> out;
  for (int i = 0; i < n; ++i) out.push_back(runtime_error_trace(set, prefix + std::to_string(i)));
  return out;
}

std::vector<std::string> logs_of(const TraceSet& set) {
  std::vector<std::string> out;
  for (const auto& r : set.traces("rmsnorm_h2048")) out.push_back(r.value.evaluation->log);
  return out;
}

TEST(TraceSetWithTraces, OlderSnapshotsStayAsTheyWere) {
  const TraceSet base = TraceSet::load(fib::testing::source_dir() / "examples" / "dataset");
  Diagnostics diag;
  // More than a chunk, so that the next snapshots share full chunks and a partial last one.
  const std::size_t n = RecordList<Trace>::kChunkSize + 44;
  const TraceSet first =
      base.with_traces(numbered_traces(base, "first ", static_cast<int>(n)), diag);
  const std::vector<std::string> base_logs = logs_of(base);
  const std::vector<std::string> first_logs = logs_of(first);
  const Record<Trace>* first_last = &first.traces("rmsnorm_h2048").back();

  // Two snapshots made from the same one, each appending to the partial chunk they share.
  const TraceSet left = first.with_traces(numbered_traces(first, "left ", 3), diag);
  const TraceSet right = first.with_traces(numbered_traces(first, "right ", 5), diag);
  ASSERT_TRUE(diag.empty()) << diag.to_string();

  EXPECT_EQ(logs_of(base), base_logs);
  EXPECT_EQ(logs_of(first), first_logs);
  EXPECT_EQ(&first.traces("rmsnorm_h2048").back(), first_last);  // not moved either
  std::vector<std::string> want_left = first_logs, want_right = first_logs;
  for (int i = 0; i < 3; ++i) want_left.push_back("left " + std::to_string(i));
  for (int i = 0; i < 5; ++i) want_right.push_back("right " + std::to_string(i));
  EXPECT_EQ(logs_of(left), want_left);
  EXPECT_EQ(logs_of(right), want_right);

  // What did not change is shared, not copied: the first full chunk, and everything but traces.
  EXPECT_EQ(&left.traces("rmsnorm_h2048").front(), &first.traces("rmsnorm_h2048").front());
  EXPECT_EQ(&right.traces("rmsnorm_h2048").front(), &first.traces("rmsnorm_h2048").front());
  EXPECT_EQ(&left.definitions().front(), &base.definitions().front());
  EXPECT_EQ(left.solution("rmsnorm_h2048_naive"), base.solution("rmsnorm_h2048_naive"));
  EXPECT_EQ(&left.files(), &base.files());
}

TEST(TraceSetWithTraces, ChangingACopyLeavesTheOriginal) {
  const TraceSet base = TraceSet::load(fib::testing::source_dir() / "examples" / "dataset");
  const std::size_t definitions = base.definitions().size();
  const std::size_t workloads = base.workload_count();
  const std::size_t solutions = base.solution_count();
  const std::size_t traces = base.trace_count();
  TraceSet copy = base;
  Definition d = *base.definition("rmsnorm_h2048");
  d.name = "rmsnorm_copy_only";
  copy.add_definition(d);
  Solution s = base.solution("rmsnorm_h2048_naive")->value;
  s.name = "rmsnorm_copy_only_naive";
  copy.add_solution(s);
  Trace w = base.workloads("rmsnorm_h2048").front().value;
  w.workload.uuid = "copy-only-workload";
  copy.add_workload(w);
  copy.add_trace(runtime_error_trace(base, "copy only"));

  EXPECT_EQ(copy.definitions().size(), definitions + 1);
  EXPECT_EQ(copy.workload_count(), workloads + 1);
  EXPECT_EQ(copy.solution_count(), solutions + 1);
  EXPECT_EQ(copy.trace_count(), traces + 1);
  EXPECT_EQ(base.definitions().size(), definitions);
  EXPECT_EQ(base.definition("rmsnorm_copy_only"), nullptr);
  EXPECT_EQ(base.workload_count(), workloads);
  EXPECT_EQ(base.workload("copy-only-workload"), nullptr);
  EXPECT_EQ(base.solution_count(), solutions);
  EXPECT_EQ(base.solution("rmsnorm_copy_only_naive"), nullptr);
  EXPECT_EQ(base.trace_count(), traces);
}

// Readers go over a snapshot while other snapshots are made from it and from one another and
// dropped: every read sees the snapshot as it was made. (Run under ThreadSanitizer, this also
// shows that no memory is written while shared.)
TEST(TraceSetWithTraces, ReadingASnapshotWhileNewOnesAreMade) {
  const TraceSet base = TraceSet::load(fib::testing::source_dir() / "examples" / "dataset");
  Diagnostics diag;
  const TraceSet read = base.with_traces(numbered_traces(base, "read ", 300), diag);
  const std::vector<std::string> want = logs_of(read);
  const std::size_t want_count = read.trace_count();
  std::atomic<bool> done{false};
  std::atomic<int> mismatches{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!done.load() || reads.load() < 4) {
        if (logs_of(read) != want) ++mismatches;
        if (read.trace_count() != want_count) ++mismatches;
        ++reads;
      }
    });
  }
  std::size_t made = 0;
  for (int round = 0; round < 20; ++round) {
    Diagnostics round_diag;
    TraceSet next = read.with_traces(numbered_traces(read, "next ", 7), round_diag);
    for (int step = 0; step < 5; ++step) {
      next = next.with_traces(numbered_traces(read, "more ", 60), round_diag);
    }
    made += next.traces("rmsnorm_h2048").size();
    ASSERT_TRUE(round_diag.empty()) << round_diag.to_string();
  }
  done = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(made, 20 * (want.size() + 7 + 5 * 60));
  EXPECT_EQ(logs_of(read), want);
}

}  // namespace
}  // namespace fib
