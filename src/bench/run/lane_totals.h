// One lane's share of a run's totals: what its workloads' setups, builds and evaluations add to
// the RunResult. Each lane counts its own, so lanes never wait on each other to count; the run
// adds them up once the lanes have stopped (add_lane_totals).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "fib/bench/run/run.h"

namespace fib::bench::detail {

struct Totals {
  std::size_t done = 0;  // evaluations finished or given up: the run's progress
  RunCounts counts;      // evaluations and reference failures (not `resumed`: the plan's)
  RunTiming timing;      // all but wall_seconds (the run's)
  WorkloadSetup setup;
  WorkerStarts workers;
  std::size_t reference_runs_reused = 0;
  std::map<std::string, int> skipped;  // solution -> evaluations not run after its timeout
};

// A lane's totals are written by the lane's thread and by the judgements it runs beside its
// evaluations (they record traces from threads of their own), and `done` is read by any lane
// for progress: hence a mutex of their own, held only for the update or the read and never
// while taking another lock.
class LaneTotals {
 public:
  template <class F>
  void update(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    f(totals_);
  }
  std::size_t done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return totals_.done;
  }
  Totals get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return totals_;
  }

 private:
  mutable std::mutex mu_;
  Totals totals_;
};

// Adds one lane's totals to the run's result and its skipped counts per solution.
inline void add_lane_totals(const Totals& t, RunResult& r, std::map<std::string, int>& skipped) {
  r.counts.evaluations += t.counts.evaluations;
  r.counts.reference_failures += t.counts.reference_failures;
  r.timing.timed_seconds += t.timing.timed_seconds;
  r.timing.build_seconds += t.timing.build_seconds;
  r.timing.warmup_seconds += t.timing.warmup_seconds;
  r.timing.judge_wait_seconds += t.timing.judge_wait_seconds;
  r.timing.overhead_seconds += t.timing.overhead_seconds;
  r.timing.cache_flush_seconds += t.timing.cache_flush_seconds;
  r.timing.overhead_evaluations += t.timing.overhead_evaluations;
  r.setup.workload_setup_seconds += t.setup.workload_setup_seconds;
  r.setup.workloads_prepared += t.setup.workloads_prepared;
  r.setup.inputs_seconds += t.setup.inputs_seconds;
  r.setup.inputs_made_ahead += t.setup.inputs_made_ahead;
  r.setup.inputs_wait_seconds += t.setup.inputs_wait_seconds;
  r.setup.reference_seconds += t.setup.reference_seconds;
  r.workers.starts += t.workers.starts;
  r.workers.start_seconds += t.workers.start_seconds;
  r.reference_cache.runs_reused += t.reference_runs_reused;
  for (const auto& [solution, n] : t.skipped) skipped[solution] += n;
}

}  // namespace fib::bench::detail
