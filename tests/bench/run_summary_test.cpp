// The text summary a run ends with: its note on event-timed short kernels.
#include <gtest/gtest.h>

#include <string>

#include "fib/bench/run/run.h"

namespace fib::bench {
namespace {

Trace passed_trace(const std::string& solution, double latency_ms, const std::string& method) {
  Trace t;
  t.definition = "rmsnorm_h2048";
  t.solution = solution;
  Evaluation e;
  e.status = EvaluationStatus::kPassed;
  Performance p;
  p.latency_ms = latency_ms;
  p.reference_latency_ms = 2 * latency_ms;
  p.speedup_factor = 2;
  p.extra = Json{{"method", method}};
  e.performance = p;
  t.evaluation = e;
  return t;
}

RunResult gpu_run() {
  RunResult r;
  r.gpu = true;
  r.devices = {"cuda:0 (NVIDIA H100 80GB HBM3)"};
  r.wall_seconds = 10;
  r.timed_seconds = 5;
  return r;
}

TEST(RunSummary, EventTimedKernelsUnderTenMicrosecondsGetTheCuptiAdvice) {
  RunResult r = gpu_run();
  r.traces.push_back(passed_trace("a", 0.0018, "cuda_events"));
  r.traces.push_back(passed_trace("b", 0.0095, "cuda_events_raw"));
  r.traces.push_back(passed_trace("c", 0.0450, "cuda_events"));
  r.traces.push_back(passed_trace("d", 0.0020, "cupti"));  // CUPTI-timed: not counted
  Trace failed = passed_trace("e", 0.0010, "cuda_events");
  failed.evaluation->status = EvaluationStatus::kIncorrectNumerical;
  failed.evaluation->performance.reset();
  r.traces.push_back(failed);
  const std::string text = render_summary(r);
  EXPECT_NE(text.find("timer: CUDA events; 2 of 3 passed evaluations measured under 10 us, where "
                      "event medians move by a few percent from run to run (each run's launch "
                      "offset): to compare them across runs, use --gpu-timer cupti "
                      "(docs/gpu-timing.md)\n"),
            std::string::npos)
      << text;
}

TEST(RunSummary, NoTimerNoteWhenNothingShortWasEventTimed) {
  RunResult r = gpu_run();
  r.traces.push_back(passed_trace("a", 0.0100, "cuda_events"));  // 10 us: not under
  r.traces.push_back(passed_trace("b", 0.0018, "cupti"));
  EXPECT_EQ(render_summary(r).find("timer:"), std::string::npos);

  RunResult cpu;  // a CPU run: its latencies are not event times
  cpu.traces.push_back(passed_trace("a", 0.0018, "cpu"));
  EXPECT_EQ(render_summary(cpu).find("timer:"), std::string::npos);
}

}  // namespace
}  // namespace fib::bench
