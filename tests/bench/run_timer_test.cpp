// The timer description a run's traces record comes from the timer the run chose.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "bench/run/timer.h"
#include "fib/base/diagnostics.h"

namespace fib::bench::detail {
namespace {

TEST(RunTimer, CpuLanesDescribeTheCpuTimerWhateverTheGpuTimer) {
  const std::string cpu = timer_description(false, "events");
  EXPECT_NE(cpu.find("steady_clock"), std::string::npos) << cpu;
  EXPECT_EQ(timer_description(false, "cupti"), cpu);
  EXPECT_EQ(timing_method_name(false, "cupti"), "cpu");
}

TEST(RunTimer, EachGpuTimerDescribesItself) {
#ifndef FIB_HAVE_CUDA
  GTEST_SKIP() << "this fib was built without the CUDA path";
#else
  const std::string events = timer_description(true, "events");
  const std::string raw = timer_description(true, "events-raw");
  const std::string cupti = timer_description(true, "cupti");
  const std::set<std::string> distinct{events, raw, cupti, timer_description(false, "events")};
  EXPECT_EQ(distinct.size(), 4u) << events << "\n" << raw << "\n" << cupti;

  EXPECT_NE(events.find("CUDA events"), std::string::npos) << events;
  EXPECT_NE(events.find("cost subtracted"), std::string::npos) << events;
  EXPECT_NE(raw.find("CUDA events"), std::string::npos) << raw;
  EXPECT_NE(raw.find("not subtracted"), std::string::npos) << raw;
  EXPECT_NE(cupti.find("CUPTI"), std::string::npos) << cupti;
  EXPECT_EQ(cupti.find("event pair"), std::string::npos) << cupti;
  EXPECT_EQ(cupti.find("CUDA events"), std::string::npos) << cupti;

  EXPECT_EQ(timing_method_name(true, "events"), "cuda_events");
  EXPECT_EQ(timing_method_name(true, "events-raw"), "cuda_events_raw");
  EXPECT_EQ(timing_method_name(true, "cupti"), "cupti");
#endif
}

TEST(RunTimer, AnUnknownGpuTimerIsAnErrorWithASuggestion) {
  EXPECT_NO_THROW(check_gpu_timer("events"));
  EXPECT_NO_THROW(check_gpu_timer("events-raw"));
  EXPECT_NO_THROW(check_gpu_timer("cupti"));
  try {
    check_gpu_timer("cuptii");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'cupti'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fib::bench::detail
