// The server's dataset snapshot (ServeContext): the server's own appended traces are in the next
// snapshot at once and do not make the watcher reload; traces another process appends on disk
// are picked up within the check interval; readers during a reload get the old snapshot or the
// new one, never an error or a wait for the load.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "fib/base/json.h"
#include "fib/dataset/files.h"
#include "fib/dataset/layout.h"
#include "fib/serve/server.h"
#include "fib/trace/signature.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::serve {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kDefinition = "rmsnorm_h2048";
constexpr const char* kSolution = "rmsnorm_h2048_naive";

// `count` signed RUNTIME_ERROR traces of the naive RMSNorm on its first workload, told apart by
// their log.
std::vector<Trace> signed_traces(const TraceSet& set, std::size_t count, const std::string& tag) {
  static const SigningKey key = SigningKey::generate();
  std::vector<Trace> out;
  for (std::size_t i = 0; i < count; ++i) {
    Trace t;
    t.definition = kDefinition;
    t.workload = set.workloads(kDefinition).at(0).value.workload;
    t.solution = kSolution;
    Evaluation e;
    e.status = EvaluationStatus::kRuntimeError;
    e.environment.hardware = "test-cpu";
    e.timestamp = "2026-11-28T00:00:00Z";
    e.log = tag + " " + std::to_string(i);
    t.evaluation = e;
    sign_trace(t, key);
    out.push_back(std::move(t));
  }
  return out;
}

// The traces file of the naive RMSNorm, where `fib run` and the server append its traces.
fs::path traces_file(const TraceSet& set) {
  const Definition& d = *set.definition(kDefinition);
  return set.root() / layout::traces_file(set.solution(kSolution)->value.author, d.op_type, d.name);
}

// Appends as another process would: straight to the file, nothing told to the server.
void append_externally(const TraceSet& set, const std::vector<Trace>& traces) {
  std::vector<std::string> lines;
  for (const Trace& t : traces) lines.push_back(dump_json_line(to_json(t)));
  append_jsonl(traces_file(set), lines);
}

class ServeSnapshot : public ::testing::Test {
 protected:
  void SetUp() override {
    fib::testing::copy_tree(fib::testing::source_dir() / "examples" / "dataset", root());
  }
  fs::path root() const { return tmp_.path() / "dataset"; }
  fib::testing::TempDir tmp_;
};

// Waits up to `limit` for `done`; whether it came.
template <typename Fn>
bool eventually(Fn done, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST_F(ServeSnapshot, OwnTracesAreInTheNextSnapshotAndCauseNoReload) {
  ServeContext context(root(), "fib-examples", tmp_.path() / "state");
  const auto before = context.traces();
  const std::size_t count = before->trace_count();
  std::vector<Trace> mine;
  for (int round = 1; round <= 3; ++round) {
    // As a task does: append (bench::run_benchmark), note each append, publish, then finish.
    mine = signed_traces(*before, 2, "own " + std::to_string(round));
    append_externally(*before, mine);
    for (const Trace& t : mine) context.note_own_append(t);
    context.add_own_traces(mine);
    const auto now = context.traces();
    EXPECT_EQ(now->trace_count(), count + 2 * static_cast<std::size_t>(round));
    EXPECT_EQ(now->traces(kDefinition).back().value.evaluation->log, mine.back().evaluation->log);
    EXPECT_FALSE(now->traces(kDefinition).back().value.signer.empty());
  }
  // Applying them again (a reload that read them first, then the task's own update) adds nothing.
  const auto published = context.traces();
  context.add_own_traces(mine);
  EXPECT_EQ(context.traces(), published);
  // The watcher checks the files at least twice meanwhile: they are what the server wrote, so
  // the snapshot stays the same object (no reload).
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(context.traces(), published);
  EXPECT_EQ(context.traces()->trace_count(), count + 6);
  // And a fresh load agrees with it.
  EXPECT_EQ(TraceSet::load(root()).trace_count(), count + 6);
}

TEST_F(ServeSnapshot, AnExternalAppendIsPickedUpWithinTheCheckInterval) {
  ServeContext context(root(), "fib-examples", tmp_.path() / "state");
  const auto before = context.traces();
  append_externally(*before, signed_traces(*before, 3, "external"));
  const auto appended = Clock::now();
  ASSERT_TRUE(
      eventually([&] { return context.traces()->trace_count() == before->trace_count() + 3; },
                 std::chrono::milliseconds(5000)));
  // Checked once a second: within two intervals and the load.
  EXPECT_LT(Clock::now() - appended, std::chrono::milliseconds(3000));
  EXPECT_EQ(before->trace_count(),
            TraceSet::load(fib::testing::source_dir() / "examples" / "dataset")
                .trace_count());  // the old snapshot is not modified
}

TEST_F(ServeSnapshot, ReadersDuringAReloadGetTheOldOrTheNewSnapshot) {
  // Enough signed lines that the reload takes a while (each verifies its signature).
  {
    const TraceSet set = TraceSet::load(root());
    append_externally(set, signed_traces(set, 1000, "bulk"));
  }
  ServeContext context(root(), "fib-examples", tmp_.path() / "state");
  const auto before = context.traces();
  const std::size_t old_count = before->trace_count();
  const std::size_t new_count = old_count + 1000;
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> reads{0}, wrong{0}, saw_new{0};
  std::atomic<long long> slowest_us{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    readers.emplace_back([&] {
      while (!stop) {
        const auto t0 = Clock::now();
        const auto set = context.traces();
        const auto us =
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
        long long seen = slowest_us;
        while (us > seen && !slowest_us.compare_exchange_weak(seen, us)) {
        }
        const std::size_t n = set ? set->trace_count() : 0;
        if (n == new_count)
          ++saw_new;
        else if (n != old_count)
          ++wrong;
        ++reads;
      }
    });
  }
  append_externally(*before, signed_traces(*before, 1000, "more"));
  const bool reloaded = eventually([&] { return saw_new > 0; }, std::chrono::milliseconds(8000));
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_TRUE(reloaded);
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(reads, 1000u);
  // A read takes the snapshot under a short lock: never the load's time (about a second here).
  EXPECT_LT(slowest_us, 250'000) << "slowest read " << slowest_us << " us";
  EXPECT_EQ(context.traces()->trace_count(), new_count);
}

}  // namespace
}  // namespace fib::serve
