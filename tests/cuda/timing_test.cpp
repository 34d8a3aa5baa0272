// GPU timing (include/fib/cuda/timing.h): the pure logic (CUPTI records split into iterations,
// the kernel-set rule, the roofline, clock reasons, NVML's absence) runs everywhere; the timer
// itself needs a GPU (FIB_REQUIRE_GPU skips visibly without one).
//
// The GPU tests time real kernels, so they must not share the GPU with each other: ctest runs
// test processes in parallel (-j), and each GPU test here holds an exclusive lock on a file for
// its duration, so they run one at a time.
#include "fib/cuda/timing.h"

#include <cuda_runtime.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "fib/cuda/calibration.h"
#include "fib/cuda/clocks.h"
#include "fib/cuda/roofline.h"
#include "support/gpu.h"

namespace fib::cuda {
namespace {

// ---- pure logic -------------------------------------------------------------------------------

KernelRecord rec(std::string name, std::uint32_t corr, std::uint64_t start, std::uint64_t end,
                 std::uint32_t stream = 7) {
  return KernelRecord{std::move(name), corr, start, end, stream};
}

TEST(CudaTimingLogic, RecordsSplitIntoIterationsAtMarkersWithoutTheTimersOwnKernels) {
  // Two iterations (markers 10 and 20). Records arrive out of order (CUPTI delivers per-stream
  // buffers); the blocking kernel and flush passes are the timer's own and are left out; a
  // kernel launched before the first marker belongs to no iteration.
  std::vector<KernelRecord> records = {
      rec("b", 23, 5'000, 9'000, 8),
      rec("fib_timing_flush_read", 19, 0, 10),
      rec("a", 12, 1'000, 3'000),
      rec(std::string(kMarkerKernelName), 20, 100, 101),
      rec("stray", 5, 0, 10),
      rec("fib_timing_spin", 8, 0, 10),
      rec(std::string(kMarkerKernelName), 10, 50, 51),
      rec("a", 21, 4'000, 6'000),
      rec("b", 13, 2'000, 2'500, 8),
      rec("fib_timing_flush_write", 18, 0, 10),
  };
  std::vector<IterationKernels> its = split_iterations(records);
  ASSERT_EQ(its.size(), 2u);
  ASSERT_EQ(its[0].kernels.size(), 2u);
  EXPECT_EQ(its[0].kernels[0].name, "a");
  EXPECT_EQ(its[0].kernels[1].name, "b");
  // First start 1000 ns, last end 3000 ns; durations 2000 + 500 ns.
  EXPECT_DOUBLE_EQ(its[0].span_ms(), 0.002);
  EXPECT_DOUBLE_EQ(its[0].sum_ms(), 0.0025);
  // Overlapping kernels on two streams: span 4000..9000, sum 2000 + 4000.
  EXPECT_DOUBLE_EQ(its[1].span_ms(), 0.005);
  EXPECT_DOUBLE_EQ(its[1].sum_ms(), 0.006);
  EXPECT_TRUE(is_internal_kernel("fib_timing_marker"));
  EXPECT_FALSE(is_internal_kernel("fib_calib_sleep"));
}

TEST(CudaTimingLogic, TheWindowAuditFindsKernelsOutsideTheirCallsWindow) {
  const std::string open(kMarkerKernelName), close(kWindowEndKernelName);
  // Call 1: kernel a inside [open end 100, close start 500]. Call 2: kernel b (stream 9)
  // ends 20 us after its window closed. The timer's own kernels never count.
  std::vector<KernelRecord> records = {
      rec(open, 10, 90, 100),
      rec("a", 11, 150, 400),
      rec("fib_timing_worker_check", 12, 600, 700),
      rec(close, 13, 500, 510),
      rec(open, 20, 1'000, 1'100),
      rec("b", 21, 1'200, 21'600, 9),
      rec(close, 22, 1'600, 1'610),
  };
  std::vector<CallKernel> first;
  std::size_t windows = 0;
  auto escape = window_escape(records, &first, &windows);
  EXPECT_EQ(windows, 2u);
  ASSERT_TRUE(escape.has_value());
  EXPECT_EQ(*escape,
            "kernel b (stream 9) of call 2 ended 20.0 us after the call's window closed on the "
            "harness's stream (work left running on a side stream, not joined back)");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].name, "a");
  EXPECT_DOUBLE_EQ(first[0].start_ms, 50e-6);  // 50 ns after the window opened
  // A kernel that ran before its window opened: not ordered after the harness's stream.
  std::vector<KernelRecord> early = {rec(open, 10, 5'000, 5'100), rec("c", 11, 100, 3'100, 4),
                                     rec(close, 12, 5'200, 5'210)};
  auto e2 = window_escape(early);
  ASSERT_TRUE(e2.has_value());
  EXPECT_EQ(*e2,
            "kernel c (stream 4) of call 1 started 5.0 us before the call's window opened on the "
            "harness's stream (work not ordered after the stream fib gave the call)");
  // Inside: no escape.
  std::vector<KernelRecord> fine = {rec(open, 1, 0, 10), rec("d", 2, 10, 40, 3),
                                    rec(close, 3, 40, 41)};
  EXPECT_FALSE(window_escape(fine).has_value());
}

IterationKernels iteration(std::vector<std::string> names) {
  IterationKernels it;
  std::uint32_t corr = 1;
  for (std::string& n : names) it.kernels.push_back(rec(std::move(n), corr++, 0, 1));
  return it;
}

TEST(CudaTimingLogic, AChangedKernelSetIsReportedWithBothSets) {
  std::vector<IterationKernels> its;
  for (int i = 0; i < 6; ++i) its.push_back(iteration({"a"}));
  its.push_back(iteration({"b", "a"}));  // iteration 7
  its.push_back(iteration({"a"}));
  auto why = kernel_set_mismatch(its);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "iteration 7 launched {a,b} but iteration 1 launched {a}");
  // Numbering continues from the first given iteration.
  auto later = kernel_set_mismatch(std::span<const IterationKernels>(its).subspan(4), 5);
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(*later, "iteration 7 launched {a,b} but iteration 5 launched {a}");
}

TEST(CudaTimingLogic, KernelSetsCompareNamesAndCountsNotOrder) {
  std::vector<IterationKernels> same = {iteration({"a", "b", "b"}), iteration({"b", "a", "b"})};
  EXPECT_FALSE(kernel_set_mismatch(same).has_value());
  std::vector<IterationKernels> fewer = {iteration({"a", "b", "b"}), iteration({"a", "b"})};
  auto why = kernel_set_mismatch(fewer);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "iteration 2 launched {a,b} but iteration 1 launched {a,b x2}");
  EXPECT_EQ(kernel_set_text(iteration({})), "{}");
  std::vector<IterationKernels> one = {iteration({"a"})};
  EXPECT_FALSE(kernel_set_mismatch(one).has_value());
}

TEST(CudaTimingLogic, PeaksAreKeyedByDeviceName) {
  DevicePeaks h100 = device_peaks("NVIDIA H100 80GB HBM3", 3.35e12);
  EXPECT_EQ(h100.key, "h100_sxm");
  EXPECT_DOUBLE_EQ(*h100.flops_per_second(MathKind::kBf16Tensor), 989.4e12);
  EXPECT_DOUBLE_EQ(*h100.flops_per_second(MathKind::kFp16Tensor), 989.4e12);
  EXPECT_DOUBLE_EQ(*h100.flops_per_second(MathKind::kFp8Tensor), 1978.9e12);
  EXPECT_DOUBLE_EQ(*h100.flops_per_second(MathKind::kTf32Tensor), 494.7e12);
  EXPECT_DOUBLE_EQ(*h100.flops_per_second(MathKind::kFp32), 66.9e12);
  EXPECT_DOUBLE_EQ(h100.dram_bytes_per_second, 3.35e12);
  EXPECT_EQ(device_peaks("NVIDIA H200", 4.8e12).key, "h200_sxm");
  // Parts with lower peaks are not mistaken for the SXM ones.
  EXPECT_EQ(device_peaks("NVIDIA H100 PCIe", 2.0e12).key, "unknown");
  EXPECT_EQ(device_peaks("NVIDIA H100 NVL", 3.9e12).key, "unknown");
  DevicePeaks other = device_peaks("NVIDIA GeForce RTX 4090", 1.0e12);
  EXPECT_EQ(other.key, "unknown");
  EXPECT_FALSE(other.flops_per_second(MathKind::kBf16Tensor).has_value());
  EXPECT_EQ(math_kind_name(MathKind::kFp8Tensor), "fp8");
}

TEST(CudaTimingLogic, RooflineGivesAchievedRatesTheFloorAndTheBound) {
  const DevicePeaks p = device_peaks("NVIDIA H100 80GB HBM3", 3.0e12);
  // 1.5 GB in 1 ms: 1.5 TB/s, half the peak; 100 GFLOP of bf16 in 1 ms: 100 TFLOP/s.
  Roofline r = roofline({1.5e9, 1e11, MathKind::kBf16Tensor, 1.0}, p);
  EXPECT_DOUBLE_EQ(*r.bytes_per_second, 1.5e12);
  EXPECT_DOUBLE_EQ(*r.bandwidth_fraction, 0.5);
  EXPECT_DOUBLE_EQ(*r.flops_per_second, 1e14);
  EXPECT_NEAR(*r.flops_fraction, 1e14 / 989.4e12, 1e-12);
  EXPECT_DOUBLE_EQ(*r.floor_ms, 0.5);  // 1.5e9 / 3e12 s, larger than 1e11 / 989.4e12 s
  EXPECT_EQ(r.bound, "memory");
  EXPECT_TRUE(r.plausible);
  EXPECT_TRUE(r.note.empty());
  // Only FLOPs known: compute-bound floor.
  Roofline c = roofline({std::nullopt, 989.4e9, MathKind::kBf16Tensor, 2.0}, p);
  EXPECT_FALSE(c.bytes_per_second.has_value());
  EXPECT_NEAR(*c.floor_ms, 1.0, 1e-12);
  EXPECT_EQ(c.bound, "compute");
  EXPECT_NEAR(*c.flops_fraction, 0.5, 1e-12);
}

// A PASSED trace's share of the roofline: the time the peaks allow over the time it took.
TEST(CudaTimingLogic, RooflineShareAndItsLogLine) {
  const DevicePeaks p = device_peaks("NVIDIA H100 80GB HBM3", 3.0e12);
  const Roofline r = roofline({1.5e9, 1e11, MathKind::kBf16Tensor, 1.25}, p);
  EXPECT_DOUBLE_EQ(*r.share, 0.4);  // floor 0.5 ms of 1.25 ms
  EXPECT_DOUBLE_EQ(to_json(r)["share"].get<double>(), 0.4);
  EXPECT_EQ(roofline_line(r, 1.25),
            "at 40.0% of the roofline (memory-bound: 0.5 ms at the device's peaks, took 1.25 ms; "
            "1200 GB/s, 40.0% of peak DRAM bandwidth; 80.0 TFLOP/s, 8.1% of peak)");
  // No peaks known: no share, no line.
  const Roofline unknown =
      roofline({1.5e9, std::nullopt, MathKind::kBf16Tensor, 1.0}, device_peaks("some GPU", 0));
  EXPECT_FALSE(unknown.share.has_value());
  EXPECT_EQ(roofline_line(unknown, 1.0), "");
}

TEST(CudaTimingLogic, FasterThanTheHardwareIsFlaggedImplausible) {
  const DevicePeaks p = device_peaks("NVIDIA H100 80GB HBM3", 3.0e12);
  // 1.04x peak bandwidth is within the 5% allowance; 1.2x is not.
  EXPECT_TRUE(roofline({3.12e9, std::nullopt, MathKind::kBf16Tensor, 1.0}, p).plausible);
  Roofline bw = roofline({3.6e9, std::nullopt, MathKind::kBf16Tensor, 1.0}, p);
  EXPECT_FALSE(bw.plausible);
  EXPECT_NE(bw.note.find(kImplausibleNote), std::string::npos) << bw.note;
  EXPECT_NE(bw.note.find("peak DRAM bandwidth"), std::string::npos) << bw.note;
  // fp8 FLOPs at twice the fp8 peak.
  Roofline fl = roofline({std::nullopt, 2 * 1978.9e9, MathKind::kFp8Tensor, 1.0}, p);
  EXPECT_FALSE(fl.plausible);
  EXPECT_NE(fl.note.find("fp8"), std::string::npos) << fl.note;
  // The same FLOPs counted against an unknown device's (absent) peak: no verdict either way.
  Roofline unknown = roofline({std::nullopt, 2 * 1978.9e9, MathKind::kFp8Tensor, 1.0},
                              device_peaks("some GPU", 0));
  EXPECT_TRUE(unknown.plausible);
  EXPECT_FALSE(unknown.flops_fraction.has_value());
  EXPECT_FALSE(unknown.floor_ms.has_value());
  Json j = to_json(bw);
  EXPECT_EQ(j["plausible"], false);
  EXPECT_TRUE(j.contains("bandwidth_fraction"));
}

TEST(CudaTimingLogic, ClockReasonsAreNamedAndSlowdownsRecognized) {
  using namespace clock_reason;
  EXPECT_EQ(clock_reason_names(kGpuIdle | kSwThermalSlowdown),
            (std::vector<std::string>{"gpu_idle", "sw_thermal_slowdown"}));
  EXPECT_EQ(clock_reason_names(0x1000), (std::vector<std::string>{"0x1000"}));
  ClockReading c;
  c.clock_reasons = kGpuIdle;
  EXPECT_FALSE(c.slowed_down());
  c.clock_reasons = kSwPowerCap;
  EXPECT_TRUE(c.slowed_down());
  c.clock_reasons.reset();
  EXPECT_FALSE(c.slowed_down());
}

TEST(CudaTimingLogic, ReadingsBecomeJsonWithOnlyTheFieldsNvmlAnswered) {
  ClockReading c;
  c.available = true;
  c.sm_clock_mhz = 1980;
  c.temperature_c = 41;
  c.memory_temperature_c = 48;
  c.clock_reasons = clock_reason::kSwPowerCap;
  Json j = to_json(c);
  EXPECT_EQ(j["sm_clock_mhz"], 1980);
  EXPECT_EQ(j["temperature_c"], 41);
  EXPECT_EQ(j["memory_temperature_c"], 48);
  EXPECT_EQ(j["clock_reasons"], Json::array({"sw_power_cap"}));
  EXPECT_EQ(j["slowed_down"], true);
  EXPECT_FALSE(j.contains("memory_clock_mhz"));
  EXPECT_FALSE(j.contains("power_watts"));
  c.memory_temperature_c.reset();  // a board without an HBM sensor
  EXPECT_FALSE(to_json(c).contains("memory_temperature_c"));
}

TEST(CudaTimingLogic, NvmlWithoutTheDeviceLeavesFieldsMissingNotAnError) {
  DeviceInfo none;
  none.pci_bus_id = "0000:ff:1f.7";  // no GPU sits there
  ClockReading c;
  EXPECT_NO_THROW(c = read_clocks(none));
  EXPECT_FALSE(c.available);
  EXPECT_FALSE(c.why_missing.empty());
  EXPECT_FALSE(c.sm_clock_mhz.has_value());
  Json j = to_json(c);
  EXPECT_EQ(j["available"], false);
  EXPECT_TRUE(j.contains("why_missing"));
  EXPECT_FALSE(j.contains("sm_clock_mhz"));
}

TEST(CudaTimingLogic, TheMethodIsRecordedAsData) {
  TimingMethod m;
  m.mode = TimingMode::kCupti;
  m.l2_flush = true;
  m.flush_bytes = 104857600;
  m.warmup = 3;
  m.stop = StopReason::kNoise;
  m.blocking_kernel = true;
  Json j = to_json(m);
  EXPECT_EQ(j["mode"], "cupti");
  EXPECT_EQ(j["flush_bytes"], 104857600);
  EXPECT_EQ(j["warmup"], 3);
  EXPECT_EQ(j["stop"], "noise");
  EXPECT_EQ(j["blocking_kernel"], true);
  EXPECT_FALSE(j.contains("blocking_note"));
  EXPECT_EQ(timing_mode_name(TimingMode::kGraph), "cuda_graph");
  EXPECT_EQ(stop_reason_name(StopReason::kTimeCap), "time");
  EXPECT_EQ(timing_error_kind_name(TimingError::Kind::kNotCapturable), "not_capturable");
}

// ---- on the GPU -------------------------------------------------------------------------------

// A call that forks onto a side stream: `side_ns` of work there, `main_ns` on the call's stream,
// then (when `join`) the side stream joined back. Owns its stream and events.
class SideStreamCall {
 public:
  SideStreamCall() {
    FIB_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
    FIB_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  }
  ~SideStreamCall() {
    (void)cudaStreamSynchronize(side_.get());
    (void)cudaEventDestroy(fork_);
    (void)cudaEventDestroy(join_);
  }
  SideStreamCall(const SideStreamCall&) = delete;
  SideStreamCall& operator=(const SideStreamCall&) = delete;
  Call make(std::uint64_t side_ns, std::uint64_t main_ns, bool join = true) {
    return [this, side_ns, main_ns, join](cudaStream_t st) {
      FIB_CUDA_CHECK(cudaEventRecord(fork_, st));
      FIB_CUDA_CHECK(cudaStreamWaitEvent(side_.get(), fork_, 0));
      calibration::launch_sleep(side_.get(), side_ns);
      calibration::launch_sleep(st, main_ns);
      if (!join) return;
      FIB_CUDA_CHECK(cudaEventRecord(join_, side_.get()));
      FIB_CUDA_CHECK(cudaStreamWaitEvent(st, join_, 0));
    };
  }
  cudaStream_t side() const { return side_.get(); }
  cudaEvent_t join_event() const { return join_; }

 private:
  Stream side_;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

class CudaTiming : public ::testing::Test {
 protected:
  void SetUp() override {
    FIB_REQUIRE_GPU();
    gpu_ = std::make_unique<fib::testing::ExclusiveGpu>();
    ASSERT_TRUE(gpu_->held());
    stream_ = std::make_unique<Stream>();
    info_ = device_info(0);
  }
  void TearDown() override {
    stream_.reset();
    gpu_.reset();
  }
  cudaStream_t s() const { return stream_->get(); }

  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
  }

  std::unique_ptr<fib::testing::ExclusiveGpu> gpu_;
  std::unique_ptr<Stream> stream_;
  DeviceInfo info_;
};

TEST_F(CudaTiming, ASleepOfKnownLengthIsTimedWithinAFewPercentByEveryMode) {
  constexpr double kSleepMs = 0.5;
  auto call = [](cudaStream_t st) { calibration::launch_sleep(st, 500'000); };
  for (TimingMode mode : {TimingMode::kEvents, TimingMode::kCupti, TimingMode::kGraph}) {
    TimingOptions o;
    o.mode = mode;
    o.max_iterations = 30;
    Timer timer(0, s(), o);
    TimingResult r = timer.measure(call);
    const double med = median(r.samples_ms);
    SCOPED_TRACE(std::string(timing_mode_name(mode)) + ": median " + std::to_string(med) + " ms");
    ASSERT_EQ(r.samples_ms.size(), 30u);
    // 3%: the kernel waits on the GPU's wall clock; what a timer adds (an event pair, the
    // kernel's start-up) is a few microseconds.
    EXPECT_NEAR(med, kSleepMs, 0.03 * kSleepMs);
    EXPECT_EQ(r.method.mode, mode);
    EXPECT_TRUE(r.method.l2_flush);
    EXPECT_GE(r.method.flush_bytes, 2 * info_.l2_bytes);
    EXPECT_TRUE(r.method.blocking_kernel) << r.method.blocking_note;
    EXPECT_EQ(r.method.stop, StopReason::kIterationCap);
    EXPECT_EQ(r.method.discarded_batches, 0u);
    EXPECT_GE(r.method.warmup, 1);
    // The warmup calls sleep too: their wall time is at least theirs.
    EXPECT_GE(r.method.warmup_seconds, r.method.warmup * kSleepMs / 1000.0 * 0.97);
    if (mode == TimingMode::kCupti) {
      EXPECT_EQ(r.method.event_overhead_ms, 0.0);
    } else {
      // An empty event pair: about a microsecond, not subtracted unless asked.
      EXPECT_GT(r.method.event_overhead_ms, 0.0);
      EXPECT_LT(r.method.event_overhead_ms, 0.01);
      EXPECT_FALSE(r.method.event_overhead_subtracted);
    }
    if (mode == TimingMode::kCupti) {
      ASSERT_EQ(r.kernels.size(), 1u);
      EXPECT_EQ(r.kernels[0].name, "fib_calib_sleep");
      ASSERT_EQ(r.kernel_sum_ms.size(), r.samples_ms.size());
      EXPECT_NEAR(median(r.kernel_sum_ms), med, 1e-9);  // one kernel: span == duration
    }
  }
}

TEST_F(CudaTiming, SamplesQueueInBatchesBehindOneBlockingKernelWhenNothingCanPersist) {
  // With a persisting-L2 set-aside (some devices have one by default) every sample is its own
  // batch, so it gets its own persisting reset; without one, batches grow to max_batch. This
  // test removes the set-aside (this process only) to run the batched path in every mode, with a
  // call that forks onto a side stream (CUPTI splits a batch's records into iterations at the
  // markers).
  std::size_t old_set_aside = 0;
  FIB_CUDA_CHECK(cudaDeviceGetLimit(&old_set_aside, cudaLimitPersistingL2CacheSize));
  const cudaError_t e = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    GTEST_SKIP() << "cannot remove the persisting L2 set-aside: " << cudaGetErrorString(e);
  }
  SideStreamCall forked;
  const Call call = forked.make(60'000, 20'000);
  TimingOptions o;
  o.max_iterations = 40;
  o.max_batch = 8;
  Timer timer(0, s(), o);
  double events_median = 0;
  for (TimingMode mode : {TimingMode::kEvents, TimingMode::kCupti, TimingMode::kGraph}) {
    timer.options().mode = mode;
    TimingResult r = timer.measure(call);
    const double med = median(r.samples_ms);
    if (mode == TimingMode::kEvents) events_median = med;
    SCOPED_TRACE(std::string(timing_mode_name(mode)) + ": median " + std::to_string(med) + " ms");
    EXPECT_EQ(r.method.persisting_l2_set_aside_bytes, 0);
    ASSERT_EQ(r.samples_ms.size(), 40u);
    EXPECT_EQ(r.method.max_batch_used, 8u);
    EXPECT_EQ(r.method.batches, 8u);  // 1, 2, 4, 8, 8, 8, 8, then the 1 left
    EXPECT_EQ(r.method.discarded_batches, 0u);
    EXPECT_TRUE(r.method.blocking_kernel) << r.method.blocking_note;
    // 5% and 4 us: the fork and join across streams add a little to the 60 us kernel.
    EXPECT_NEAR(med, 0.06, 0.05 * 0.06 + 0.004);
    if (mode == TimingMode::kCupti) {
      ASSERT_EQ(r.kernels.size(), 2u);
      EXPECT_NEAR(median(r.kernel_sum_ms), 0.08, 0.03 * 0.08);
    }
  }
  // The events' own cost, subtracted on request: the figure moves by exactly that.
  timer.options().mode = TimingMode::kEvents;
  timer.options().subtract_event_overhead = true;
  TimingResult sub = timer.measure(call);
  EXPECT_TRUE(sub.method.event_overhead_subtracted);
  EXPECT_GT(sub.method.event_overhead_ms, 0.0);
  EXPECT_NEAR(median(sub.samples_ms), events_median - sub.method.event_overhead_ms, 0.001);
  EXPECT_TRUE(to_json(sub)["method"].contains("event_overhead_ms"));
  FIB_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, old_set_aside));
}

TEST_F(CudaTiming, TheFlushEvictsTheL2) {
  // A read-only pass over a quarter of the L2. Without a flush the buffer stays in the L2 from
  // the previous sample; with one it comes from DRAM. (A quarter, not a half: Hopper's L2 is two
  // partitions and data read by every SM can sit in both, so a scan of half the nominal size
  // need not stay resident.)
  const std::size_t bytes = static_cast<std::size_t>(info_.l2_bytes / 4) / 16 * 16;
  DeviceBuffer data(bytes), sink(16);
  FIB_CUDA_CHECK(cudaMemset(data.data(), 1, bytes));
  FIB_CUDA_CHECK(cudaDeviceSynchronize());
  auto call = [&](cudaStream_t st) {
    calibration::launch_read(st, data.data(), bytes, sink.data(), info_.sm_count);
  };
  TimingOptions o;
  o.max_iterations = 60;
  Timer timer(0, s(), o);
  const double cold = median(timer.measure(call).samples_ms);
  timer.options().l2_flush = false;
  TimingResult warm_result = timer.measure(call);
  const double warm = median(warm_result.samples_ms);
  EXPECT_FALSE(warm_result.method.l2_flush);
  EXPECT_EQ(warm_result.method.flush_bytes, 0);
  EXPECT_GT(cold, 1.1 * warm) << "flushed " << cold * 1e3 << " us, not flushed " << warm * 1e3
                              << " us over " << bytes << " bytes";
}

TEST_F(CudaTiming, TheBlockingKernelKeepsHostLaunchGapsOut) {
  // 50 launches of a 4 us kernel, each preceded by 20 us of host work (a slow host, as Python
  // is). Unblocked, the events measure the host (about 1 ms); blocked, the launches are queued
  // before the GPU starts, so the events see what the GPU did: close to CUPTI's span, and to
  // the kernels' summed time plus the small gaps between queued kernels.
  auto spin_host = [](double us) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double, std::micro>(us);
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  auto call = [&](cudaStream_t st) {
    for (int i = 0; i < 50; ++i) {
      spin_host(20);
      calibration::launch_sleep(st, 4'000);
    }
  };
  TimingOptions o;
  o.max_iterations = 20;
  o.max_batch = 4;  // 4 x 50 launches queued behind the blocking kernel at most
  o.mode = TimingMode::kCupti;
  Timer timer(0, s(), o);
  TimingResult cupti = timer.measure(call);
  ASSERT_EQ(cupti.kernels.size(), 50u);
  const double span = median(cupti.samples_ms), kernels = median(cupti.kernel_sum_ms);
  timer.options().mode = TimingMode::kEvents;
  TimingResult blocked = timer.measure(call);
  ASSERT_TRUE(blocked.method.blocking_kernel) << blocked.method.blocking_note;
  const double ev = median(blocked.samples_ms);
  timer.options().blocking_kernel = false;
  TimingResult unblocked = timer.measure(call);
  EXPECT_FALSE(unblocked.method.blocking_kernel);
  const double ev_unblocked = median(unblocked.samples_ms);
  SCOPED_TRACE("CUPTI span " + std::to_string(span * 1e3) + " us, kernel sum " +
               std::to_string(kernels * 1e3) + " us, events blocked " + std::to_string(ev * 1e3) +
               " us, unblocked " + std::to_string(ev_unblocked * 1e3) + " us");
  // A sanity bound only: %globaltimer may tick in whole microseconds, so a 4 us wait can end
  // after a little over 3 us.
  EXPECT_GE(kernels, 50 * 0.003);
  EXPECT_NEAR(ev, span, 0.15 * span + 0.005);
  EXPECT_LT(ev, 1.5 * kernels);
  EXPECT_GT(ev_unblocked, 2.0 * ev);  // what the blocking kernel keeps out
}

TEST_F(CudaTiming, TheWindowAuditCatchesWorkLeftOnASideStream) {
  SideStreamCall forked;
  // Forked and joined: clean.
  const Call joined = forked.make(50'000, 10'000);
  // Forked, never joined: the side kernel outlives the window.
  const Call unjoined = forked.make(200'000, 10'000, /*join=*/false);
  // Launched on another stream without ordering: it runs while the blocking kernel holds ours.
  auto unordered = [&](cudaStream_t st) {
    calibration::launch_sleep(forked.side(), 10'000);
    calibration::launch_sleep(st, 10'000);
    FIB_CUDA_CHECK(cudaEventRecord(forked.join_event(), forked.side()));
    FIB_CUDA_CHECK(cudaStreamWaitEvent(st, forked.join_event(), 0));
  };
  std::size_t before = 0, after = 0;
  TimingOptions o;
  o.before_call = [&](cudaStream_t, std::size_t i) { EXPECT_EQ(i, before++); };
  o.after_call = [&](cudaStream_t, std::size_t i) { EXPECT_EQ(i, after++); };
  Timer timer(0, s(), o);
  const WindowAudit ok = timer.audit_window(joined, 3);
  if (!ok.available) GTEST_SKIP() << "CUPTI unavailable: " << ok.note;
  EXPECT_EQ(ok.iterations, 3u);
  EXPECT_FALSE(ok.escape.has_value()) << *ok.escape;
  EXPECT_EQ(ok.kernels.size(), 2u);
  EXPECT_EQ(before, 3u);
  EXPECT_EQ(after, 3u);
  before = after = 0;  // each audit numbers its calls from 0
  const WindowAudit left = timer.audit_window(unjoined, 3);
  ASSERT_TRUE(left.escape.has_value());
  EXPECT_NE(left.escape->find("after the call's window closed"), std::string::npos) << *left.escape;
  before = after = 0;
  const WindowAudit early = timer.audit_window(unordered, 3);
  ASSERT_TRUE(early.escape.has_value());
  EXPECT_NE(early.escape->find("before the call's window opened"), std::string::npos)
      << *early.escape;
  // The hooks run around measured calls too, warmup included, numbered from 0.
  before = after = 0;
  timer.options().max_iterations = 5;
  timer.options().warmup = 2;
  TimingResult r = timer.measure(joined);
  EXPECT_EQ(r.samples_ms.size(), 5u);
  // 2 warmup + 5 timed (a discarded batch is redone: more calls then)
  if (r.method.discarded_batches == 0) {
    EXPECT_EQ(before, 7u);
  }
  EXPECT_GE(before, 7u);
  EXPECT_EQ(after, before);
  // Without `warm`, a warmup of 0 still makes one call; with it (a later trial), none.
  before = after = 0;
  timer.options().warmup = 0;
  r = timer.measure(joined);
  EXPECT_EQ(r.method.warmup, 1);
  if (r.method.discarded_batches == 0) {
    EXPECT_EQ(before, 6u);
  }
  before = after = 0;
  timer.options().warm = true;
  r = timer.measure(joined);
  EXPECT_EQ(r.method.warmup, 0);
  EXPECT_LT(r.method.warmup_seconds, 0.001);
  if (r.method.discarded_batches == 0) {
    EXPECT_EQ(before, 5u);
  }
  EXPECT_EQ(r.samples_ms.size(), 5u);
}

TEST_F(CudaTiming, CuptiSeesAKernelOnASideStreamTheCallForksAndJoins) {
  SideStreamCall forked;
  const Call call = forked.make(300'000, 100'000);
  TimingOptions o;
  o.mode = TimingMode::kCupti;
  o.max_iterations = 20;
  Timer timer(0, s(), o);
  TimingResult r = timer.measure(call);
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_NE(r.kernels[0].stream_id, r.kernels[1].stream_id);
  // The two run concurrently: the span is the longer one, the sum both.
  EXPECT_NEAR(median(r.samples_ms), 0.3, 0.03 * 0.3);
  EXPECT_NEAR(median(r.kernel_sum_ms), 0.4, 0.03 * 0.4);
  timer.options().mode = TimingMode::kEvents;
  EXPECT_NEAR(median(timer.measure(call).samples_ms), 0.3, 0.03 * 0.3);
}

TEST_F(CudaTiming, CuptiReportsAnIterationThatLaunchedDifferentKernels) {
  int calls = 0;
  TimingOptions o;
  o.mode = TimingMode::kCupti;
  o.warmup = 2;
  o.max_iterations = 20;
  auto call = [&](cudaStream_t st) {
    calibration::launch_sleep(st, 20'000);
    if (++calls == o.warmup + 7) calibration::launch_empty(st);  // timed iteration 7
  };
  // Loaded before: a kernel launched for the first time behind the blocking kernel may wait for
  // the device to go idle (lazy loading); the batch would then time out and be redone without
  // the odd iteration.
  calibration::launch_empty(s());
  stream_->synchronize();
  Timer timer(0, s(), o);
  try {
    timer.measure(call);
    FAIL() << "no error";
  } catch (const TimingError& e) {
    EXPECT_EQ(e.kind(), TimingError::Kind::kKernelSetChanged);
    EXPECT_NE(std::string(e.what()).find("iteration 7 launched {fib_calib_empty,fib_calib_sleep} "
                                         "but iteration 1 launched {fib_calib_sleep}"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CudaTiming, AnUncapturableCallIsAClearGraphModeError) {
  TimingOptions o;
  o.mode = TimingMode::kGraph;
  o.max_iterations = 5;
  Timer timer(0, s(), o);
  // Synchronizing inside the call is not allowed while the stream is captured.
  auto syncs = [](cudaStream_t st) {
    calibration::launch_sleep(st, 10'000);
    FIB_CUDA_CHECK(cudaStreamSynchronize(st));
  };
  try {
    timer.measure(syncs);
    FAIL() << "no error";
  } catch (const TimingError& e) {
    EXPECT_EQ(e.kind(), TimingError::Kind::kNotCapturable);
    const std::string what = e.what();
    EXPECT_NE(what.find("could not be captured into a CUDA graph"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaErrorStreamCapture"), std::string::npos) << what;
  }
  // Work on the legacy default stream while a blocking stream (one the legacy stream
  // synchronizes with) is captured.
  cudaStream_t blocking_stream = nullptr;
  FIB_CUDA_CHECK(cudaStreamCreate(&blocking_stream));
  {
    Timer on_blocking(0, blocking_stream, o);
    auto legacy = [](cudaStream_t st) {
      calibration::launch_sleep(st, 10'000);
      calibration::launch_sleep(nullptr, 10'000);
    };
    try {
      on_blocking.measure(legacy);
      FAIL() << "no error";
    } catch (const TimingError& e) {
      EXPECT_EQ(e.kind(), TimingError::Kind::kNotCapturable) << e.what();
    }
  }
  FIB_CUDA_CHECK(cudaStreamDestroy(blocking_stream));
  // The timer and its stream are still usable.
  auto fine = [](cudaStream_t st) { calibration::launch_sleep(st, 50'000); };
  TimingResult r = timer.measure(fine);
  EXPECT_EQ(r.samples_ms.size(), 5u);
  EXPECT_NEAR(median(r.samples_ms), 0.05, 0.1 * 0.05);
}

TEST_F(CudaTiming, ACallThatSynchronizesIsTimedWithoutTheBlockingKernelAndSaysSo) {
  TimingOptions o;
  o.max_iterations = 10;
  o.blocking_timeout_ms = 100;
  Timer timer(0, s(), o);
  auto syncs = [](cudaStream_t st) {
    calibration::launch_sleep(st, 100'000);
    FIB_CUDA_CHECK(cudaStreamSynchronize(st));
  };
  TimingResult r = timer.measure(syncs);
  EXPECT_FALSE(r.method.blocking_kernel);
  EXPECT_NE(r.method.blocking_note.find("waits on the device"), std::string::npos)
      << r.method.blocking_note;
  EXPECT_GE(r.method.discarded_batches, 1u);
  EXPECT_EQ(r.samples_ms.size(), 10u);
  // Unblocked, the end event is enqueued only after the host's synchronization returns, so the
  // samples hold the kernel plus the host's wake-up and enqueue time.
  EXPECT_GE(median(r.samples_ms), 0.097);
  EXPECT_LT(median(r.samples_ms), 0.2);
  EXPECT_TRUE(to_json(r)["method"].contains("blocking_note"));
}

TEST_F(CudaTiming, CallsOfADroppedBatchAreRedoneUnderTheirIndicesSoEachNamesAKeptSample) {
  // The first timed call synchronizes, so its batch times out and is dropped: the hooks must see
  // the redone calls under the same indices (a caller's plan keys sets and its checked call on
  // them), and every index after the warmup must name one of the kept samples.
  TimingOptions o;
  o.warmup = 2;
  o.max_iterations = 6;
  o.blocking_timeout_ms = 100;
  std::vector<std::size_t> after_indices, rewinds;
  o.after_call = [&](cudaStream_t, std::size_t i) { after_indices.push_back(i); };
  o.rewound = [&](std::size_t i) { rewinds.push_back(i); };
  o.max_slowed_batch_retries = 0;  // only the timed-out batch is dropped
  Timer timer(0, s(), o);
  auto syncs = [](cudaStream_t st) {
    calibration::launch_sleep(st, 20'000);
    FIB_CUDA_CHECK(cudaStreamSynchronize(st));
  };
  TimingResult r = timer.measure(syncs);
  ASSERT_EQ(r.samples_ms.size(), 6u);
  EXPECT_FALSE(r.method.blocking_kernel);
  ASSERT_EQ(rewinds, std::vector<std::size_t>{2});  // back to the first timed call
  // Warmup 0, 1; the dropped call 2; then 2..7 redone and kept.
  EXPECT_EQ(after_indices, (std::vector<std::size_t>{0, 1, 2, 2, 3, 4, 5, 6, 7}));
}

TEST_F(CudaTiming, TheWindowAuditOfACallThatSynchronizesSkipsTheBlockingKernelWhenToldTo) {
  // A call that waits on the device would hold the blocking kernel until it timed out: told so
  // (blocking_kernel off), the audit runs without it, at once, and still sees the kernels.
  TimingOptions o;
  o.blocking_kernel = false;
  o.blocking_timeout_ms = 2000;
  Timer timer(0, s(), o);
  auto syncs = [](cudaStream_t st) {
    calibration::launch_sleep(st, 20'000);
    FIB_CUDA_CHECK(cudaStreamSynchronize(st));
  };
  const auto t0 = std::chrono::steady_clock::now();
  const WindowAudit audit = timer.audit_window(syncs, 3);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!audit.available) GTEST_SKIP() << "CUPTI unavailable: " << audit.note;
  EXPECT_FALSE(audit.escape.has_value()) << *audit.escape;
  EXPECT_EQ(audit.iterations, 3u);
  EXPECT_TRUE(audit.note.empty()) << audit.note;
  EXPECT_LT(ms, 1000.0);  // far below the 2 s the blocking kernel would have held
}

TEST_F(CudaTiming, SamplingStopsOnThePredicateOrTheTimeCap) {
  auto call = [](cudaStream_t st) { calibration::launch_sleep(st, 50'000); };
  TimingOptions o;
  o.max_iterations = 1000;
  o.max_seconds = 10;
  std::size_t asked = 0;
  o.stop = [&](std::span<const double> samples) {
    ++asked;
    return samples.size() >= 5;
  };
  Timer timer(0, s(), o);
  TimingResult noise = timer.measure(call);
  EXPECT_EQ(noise.method.stop, StopReason::kNoise);
  EXPECT_GE(noise.samples_ms.size(), 5u);
  EXPECT_LT(noise.samples_ms.size(), 16u);  // batches of 1, 2, 4, 8
  EXPECT_EQ(asked, noise.method.batches);

  timer.options().stop = nullptr;
  timer.options().max_seconds = 0.05;
  TimingResult capped = timer.measure(call);
  EXPECT_EQ(capped.method.stop, StopReason::kTimeCap);
  EXPECT_LT(capped.samples_ms.size(), 1000u);
  EXPECT_LT(capped.method.measure_seconds, 0.5);
  EXPECT_EQ(capped.method.iterations, capped.samples_ms.size());
}

TEST_F(CudaTiming, NvmlReportsClocksTemperatureAndPowerOnTheGpu) {
  ClockReading c = read_clocks(info_);
  ASSERT_TRUE(c.available) << c.why_missing;
  ASSERT_TRUE(c.sm_clock_mhz.has_value());
  EXPECT_GT(*c.sm_clock_mhz, 0u);
  ASSERT_TRUE(c.memory_clock_mhz.has_value());
  EXPECT_GT(*c.memory_clock_mhz, 0u);
  ASSERT_TRUE(c.temperature_c.has_value());
  EXPECT_GT(*c.temperature_c, 0u);
  ASSERT_TRUE(c.power_watts.has_value());
  EXPECT_GT(*c.power_watts, 0.0);
  EXPECT_TRUE(c.clock_reasons.has_value());
  // H100 and H200 boards carry an HBM temperature sensor (nvidia-smi's "Memory Current Temp").
  if (info_.name.find("H100") != std::string::npos ||
      info_.name.find("H200") != std::string::npos) {
    ASSERT_TRUE(c.memory_temperature_c.has_value()) << info_.name;
    EXPECT_GT(*c.memory_temperature_c, 5u);
    EXPECT_LT(*c.memory_temperature_c, 120u);
  }
  // A measurement records them before and after.
  Timer timer(0, s(), {});
  TimingResult r = timer.measure([](cudaStream_t st) { calibration::launch_sleep(st, 20'000); });
  EXPECT_TRUE(r.clocks_before.available) << r.clocks_before.why_missing;
  EXPECT_TRUE(r.clocks_after.sm_clock_mhz.has_value());
  Json j = to_json(r);
  EXPECT_TRUE(j["clocks_after"].contains("sm_clock_mhz")) << j.dump();
  std::cout << "clocks after: " << j["clocks_after"].dump() << "\n";
}

}  // namespace
}  // namespace fib::cuda
