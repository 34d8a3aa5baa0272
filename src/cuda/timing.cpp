// The GPU timer (include/fib/cuda/timing.h; the method is in docs/gpu-timing.md).
//
// One measurement: warmup calls (at least one), then batches of samples. A batch is
//   [persisting-L2 reset] blocking kernel, then per sample: flush write, flush read,
//   (events: start event | CUPTI: marker kernel), the work, (events: end event),
// all enqueued while the blocking kernel holds the stream; then the host releases it and
// synchronizes. The kernels are in timing.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "cuda/cupti_collector.h"
#include "cuda/timing_kernels.h"
#include "fib/cuda/timing.h"

namespace fib::cuda {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Samples of an empty event pair taken to measure the events' own overhead.
constexpr std::size_t kOverheadSamples = 16;

}  // namespace

struct Timer::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  TimingOptions options;
  DeviceInfo info;

  std::unique_ptr<DeviceBuffer> flush_buffer;  // 2x the L2, allocated on first use
  std::unique_ptr<DeviceBuffer> sink;          // the flush's read pass's (never-taken) store
  int flush_value = 0;
  bool reset_persisting = false;  // cudaCtxResetPersistingL2Cache before each batch

  // The blocking kernel's flag: two ints of host-mapped memory ([0] release, [1] timed out).
  int* host_flag = nullptr;
  int* device_flag = nullptr;

  std::vector<cudaEvent_t> events;  // start/end pairs

  ~Impl() {
    for (cudaEvent_t e : events) (void)cudaEventDestroy(e);
    if (host_flag) (void)cudaFreeHost(host_flag);
  }

  Impl(int device_ordinal, cudaStream_t s, TimingOptions o)
      : device(device_ordinal), stream(s), options(std::move(o)) {
    set_device(device);
    info = device_info(device);
    sink = std::make_unique<DeviceBuffer>(16);
    void* p = nullptr;
    FIB_CUDA_CHECK(cudaHostAlloc(&p, 2 * sizeof(int), cudaHostAllocMapped));
    host_flag = static_cast<int*>(p);
    std::memset(p, 0, 2 * sizeof(int));
    void* d = nullptr;
    FIB_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
    device_flag = static_cast<int*>(d);
    // Load the timer's own kernels now. With lazy loading (CUDA's default), a kernel's first
    // launch may wait for the device to go idle, which it never does behind a blocking kernel.
    host_flag[0] = 1;  // released: this spin returns at once
    detail::launch_spin(stream, device_flag, options.blocking_timeout_ms);
    detail::launch_flush(stream, sink->data(), 16, 0, sink->data(), 1);
    detail::launch_marker(stream);
    detail::launch_window_end(stream);
    FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  bool persisting_supported() const { return info.persisting_l2_max_bytes > 0; }

  void ensure_flush_buffer() {
    if (flush_buffer) return;
    // At least twice the L2 (FlashInfer and Triton flush with a buffer larger than the L2), in
    // whole 16-byte vectors.
    std::int64_t bytes = std::max<std::int64_t>(2 * info.l2_bytes, 8 << 20);
    bytes = (bytes + 15) / 16 * 16;
    flush_buffer = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(bytes));
  }

  void ensure_events(std::size_t samples) {
    while (events.size() < 2 * samples) {
      cudaEvent_t e = nullptr;
      FIB_CUDA_CHECK(cudaEventCreate(&e));
      events.push_back(e);
    }
  }

  void enqueue_flush() {
    detail::launch_flush(stream, flush_buffer->data(), flush_buffer->bytes(), ++flush_value,
                         sink->data(), info.sm_count);
  }

  std::size_t call_index = 0;  // calls of `work` in this measurement (for the hooks)
  void before(bool hooks) {
    if (hooks && options.before_call) options.before_call(stream, call_index);
  }
  void after(bool hooks) {
    if (hooks && options.after_call) options.after_call(stream, call_index);
    if (hooks) ++call_index;
  }

  // The untimed calls: the same sequence as a sample (flush, then the work), no events.
  // With a time cap, each call is waited for and the warmup ends once the cap is reached; the
  // hooks' call index still advances by `count`, so the calls after it keep their places in the
  // caller's plan. Returns the calls made.
  int warm(const std::function<void(cudaStream_t)>& work, int count, double max_seconds = 0) {
    const std::size_t end_index = call_index + static_cast<std::size_t>(std::max(count, 0));
    const auto t0 = Clock::now();
    int made = 0;
    for (int i = 0; i < count; ++i) {
      before(true);
      if (options.l2_flush) enqueue_flush();
      work(stream);
      after(true);
      ++made;
      if (max_seconds > 0) {
        FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
        if (seconds_since(t0) >= max_seconds) break;
      }
    }
    FIB_CUDA_CHECK(cudaDeviceSynchronize());
    call_index = std::max(call_index, end_index);
    return made;
  }

  struct BatchOutcome {
    bool timed_out = false;  // the blocking kernel gave up before the host released it
    double wall_seconds = 0;
  };

  // Runs one batch of `k` samples; event samples are appended to `samples` when the batch is
  // kept (the caller decides for CUPTI ones).
  BatchOutcome run_batch(std::size_t k, bool blocking, bool cupti,
                         const std::function<void(cudaStream_t)>& work,
                         std::vector<double>& samples, bool hooks = true) {
    BatchOutcome out;
    const auto t0 = Clock::now();
    if (reset_persisting) FIB_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
    if (!cupti) ensure_events(k);
    volatile int* flag = host_flag;
    if (blocking) {
      flag[0] = 0;
      flag[1] = 0;
      std::atomic_thread_fence(std::memory_order_seq_cst);
      detail::launch_spin(stream, device_flag, options.blocking_timeout_ms);
    }
    auto release = [&] {
      if (!blocking) return;
      std::atomic_thread_fence(std::memory_order_seq_cst);
      flag[0] = 1;
      std::atomic_thread_fence(std::memory_order_seq_cst);
    };
    try {
      for (std::size_t i = 0; i < k; ++i) {
        before(hooks);
        if (options.l2_flush) enqueue_flush();
        if (cupti) {
          detail::launch_marker(stream);
        } else {
          FIB_CUDA_CHECK(cudaEventRecord(events[2 * i], stream));
        }
        work(stream);
        if (!cupti) FIB_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], stream));
        after(hooks);
      }
    } catch (...) {
      // Never leave the spin kernel holding the stream; the call's own error is what matters.
      release();
      (void)cudaDeviceSynchronize();
      throw;
    }
    release();
    FIB_CUDA_CHECK(cudaDeviceSynchronize());
    out.wall_seconds = seconds_since(t0);
    out.timed_out = blocking && flag[1] != 0;
    if (!cupti && !out.timed_out) {
      for (std::size_t i = 0; i < k; ++i) {
        float ms = 0;
        FIB_CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
        samples.push_back(static_cast<double>(ms));
      }
    }
    return out;
  }

  // Graph mode: the call captured into an executable graph, or TimingError(kNotCapturable).
  cudaGraphExec_t capture(const Call& call) {
    std::string call_error;
    cudaError_t begin = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (begin != cudaSuccess) {
      (void)cudaGetLastError();
      throw TimingError(TimingError::Kind::kNotCapturable,
                        fmt::format("graph mode: stream capture could not begin on the timer's "
                                    "stream: {} ({})",
                                    cudaGetErrorName(begin), cudaGetErrorString(begin)));
    }
    try {
      call(stream);
    } catch (const std::exception& e) {
      call_error = e.what();
    } catch (...) {
      call_error = "the call threw a non-standard exception";
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    const cudaError_t last = cudaGetLastError();  // clears a capture error the call left behind
    if (!call_error.empty() || end != cudaSuccess || graph == nullptr) {
      if (graph) (void)cudaGraphDestroy(graph);
      std::string why;
      if (!call_error.empty()) why = "the call failed while being captured: " + call_error;
      const cudaError_t e = end != cudaSuccess ? end : last;
      if (e != cudaSuccess) {
        if (!why.empty()) why += "; ";
        why += fmt::format("cudaStreamEndCapture: {} ({})", cudaGetErrorName(e),
                           cudaGetErrorString(e));
      }
      if (why.empty()) why = "capture produced no graph";
      throw TimingError(
          TimingError::Kind::kNotCapturable,
          "graph mode: the call could not be captured into a CUDA graph (it synchronizes, uses "
          "the legacy default stream, or forks work it does not join?): " +
              why);
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    if (inst != cudaSuccess) {
      (void)cudaGetLastError();
      throw TimingError(TimingError::Kind::kNotCapturable,
                        fmt::format("graph mode: the captured graph could not be instantiated: "
                                    "{} ({})",
                                    cudaGetErrorName(inst), cudaGetErrorString(inst)));
    }
    return exec;
  }

  // One measurement under way: its result so far and the state of its sampling loop.
  struct Measurement {
    TimingResult result;
    bool cupti = false;
    std::function<void(cudaStream_t)> work;  // the call, or one launch of its graph
    bool blocking = false;                   // batches are queued behind the blocking kernel
    bool subtract = false;                   // the event overhead is subtracted from samples
    std::size_t first_timed_index = 0;       // the hooks' index of the first timed call
    std::unique_ptr<detail::CuptiKernelSession> session;  // kernel records (CUPTI)
    std::vector<IterationKernels> kept;                   // CUPTI: every kept iteration's kernels
    std::size_t batch = 1;                                // the next batch's size, before caps
    std::size_t max_batch = 1;
    double per_sample_seconds = 0;  // wall time per sample of the last kept batch
    int slowed_in_a_row = 0;        // batches dropped for a clock slowdown since the last kept one
    Clock::time_point t0;           // the sampling's start
  };

  TimingResult measure(const Call& call);
  void prepare_flush(TimingMethod& m);
  std::function<void(cudaStream_t)> timed_work(const Call& call, cudaGraphExec_t& exec);
  void measure_overhead(Measurement& r);
  bool sample(Measurement& r);
  std::size_t batch_size(Measurement& r);
  void on_timed_out_batch(Measurement& r, std::size_t k);
  bool drop_slowed_batch(Measurement& r, std::size_t before);
  void take_cupti_samples(Measurement& r, std::size_t k);
  bool stop_now(Measurement& r);
  void rewind(const Measurement& r);
  void finish(Measurement& r, bool stopped);
  WindowAudit audit_window(const Call& call, std::size_t iterations);
};

WindowAudit Timer::Impl::audit_window(const Call& call, std::size_t iterations) {
  set_device(device);
  WindowAudit audit;
  call_index = 0;
  FIB_CUDA_CHECK(cudaDeviceSynchronize());
  std::unique_ptr<detail::CuptiKernelSession> session;
  try {
    session = std::make_unique<detail::CuptiKernelSession>();
  } catch (const TimingError& e) {
    audit.note = e.what();
    return audit;
  }
  // Without the blocking kernel (a call known to wait on the device would hold it until it
  // timed out) the windows still bound each call's kernels: only launch gaps are not hidden.
  const bool blocking = options.blocking_kernel;
  volatile int* flag = host_flag;
  flag[0] = 0;
  flag[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (blocking) detail::launch_spin(stream, device_flag, options.blocking_timeout_ms);
  auto release = [&] {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    flag[0] = 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  };
  try {
    for (std::size_t i = 0; i < iterations; ++i) {
      before(true);
      detail::launch_marker(stream);
      call(stream);
      detail::launch_window_end(stream);
      after(true);
    }
  } catch (...) {
    release();
    (void)cudaDeviceSynchronize();
    throw;
  }
  release();
  FIB_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<KernelRecord> records;
  try {
    records = session->take();
  } catch (const TimingError& e) {
    audit.note = e.what();
    return audit;
  }
  audit.available = true;
  audit.escape = window_escape(std::move(records), &audit.kernels, &audit.iterations);
  if (blocking && flag[1] != 0 && !audit.escape) {
    // The spin gave up before the calls were queued (a call that waits on the device): the
    // windows still bound each call's kernels, so the verdict stands; say how it was taken.
    audit.note = "the blocking kernel timed out before the calls were queued";
  }
  return audit;
}

TimingResult Timer::Impl::measure(const Call& call) {
  set_device(device);
  call_index = 0;
  Measurement r;
  r.cupti = options.mode == TimingMode::kCupti;
  TimingMethod& m = r.result.method;
  m.mode = options.mode;
  m.device = device;
  m.device_name = info.name;
  m.l2_flush = options.l2_flush;
  prepare_flush(m);
  const int warmup = std::max(options.warm ? 0 : 1, options.warmup);
  m.warmup_requested = warmup;
  FIB_CUDA_CHECK(cudaDeviceSynchronize());

  cudaGraphExec_t exec = nullptr;
  struct GraphGuard {
    cudaGraphExec_t* exec;
    ~GraphGuard() {
      if (*exec) (void)cudaGraphExecDestroy(*exec);
    }
  } graph_guard{&exec};
  r.work = timed_work(call, exec);
  const auto warm0 = std::chrono::steady_clock::now();
  m.warmup = warm(r.work, warmup, options.max_warmup_seconds);
  m.warmup_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - warm0).count();
  r.first_timed_index = call_index;

  r.blocking = options.blocking_kernel;
  measure_overhead(r);
  if (options.read_clocks) r.result.clocks_before = read_clocks(info);
  if (r.cupti) r.session = std::make_unique<detail::CuptiKernelSession>();
  const bool stopped = sample(r);
  finish(r, stopped);
  return std::move(r.result);
}

// The L2 flush's buffer, and whether each batch starts with a persisting-L2 reset.
void Timer::Impl::prepare_flush(TimingMethod& m) {
  if (!options.l2_flush) {
    reset_persisting = false;
    return;
  }
  ensure_flush_buffer();
  m.flush_bytes = static_cast<std::int64_t>(flush_buffer->bytes());
  // Where the reset is refused (some virtualized devices), the method says there was none.
  reset_persisting = persisting_supported() && cudaCtxResetPersistingL2Cache() == cudaSuccess;
  (void)cudaGetLastError();
  m.persisting_l2_reset = reset_persisting;
}

// The work each sample times: the call itself, or (graph mode) one launch of its graph, which
// is captured into `exec` (the caller destroys it).
std::function<void(cudaStream_t)> Timer::Impl::timed_work(const Call& call, cudaGraphExec_t& exec) {
  if (options.mode != TimingMode::kGraph) return std::cref(call);
  warm(call, 1);  // module load and lazy setup stay out of the capture
  exec = capture(call);
  std::function<void(cudaStream_t)> work = [&exec](cudaStream_t s) {
    FIB_CUDA_CHECK(cudaGraphLaunch(exec, s));
  };
  FIB_CUDA_CHECK(cudaGraphUpload(exec, stream));
  return work;
}

// What an empty event pair reads here (same flush, same blocking kernel): the events' own
// cost, recorded, and subtracted from the samples when asked.
void Timer::Impl::measure_overhead(Measurement& r) {
  TimingMethod& m = r.result.method;
  m.event_overhead_ms = 0;
  if (!r.cupti) {
    std::vector<double> empty;
    const std::function<void(cudaStream_t)> nothing = [](cudaStream_t) {};
    const BatchOutcome ob =
        run_batch(kOverheadSamples, r.blocking, false, nothing, empty, /*hooks=*/false);
    if (!ob.timed_out) m.event_overhead_ms = median_of(empty);
  }
  r.subtract = !r.cupti && options.subtract_event_overhead && m.event_overhead_ms > 0;
}

// Batches of samples until the iteration cap, the noise criterion or the time cap; true when
// one of the last two stopped them.
bool Timer::Impl::sample(Measurement& r) {
  TimingMethod& m = r.result.method;
  std::vector<double>& samples = r.result.samples_ms;
  r.max_batch = std::max<std::size_t>(1, options.max_batch);
  r.t0 = Clock::now();
  while (samples.size() < options.max_iterations) {
    const std::size_t k = batch_size(r);
    const std::size_t before = samples.size();
    const BatchOutcome b = run_batch(k, r.blocking, r.cupti, r.work, samples);
    if (b.timed_out) {
      on_timed_out_batch(r, k);
      rewind(r);
      continue;
    }
    if (drop_slowed_batch(r, before)) {
      rewind(r);
      continue;
    }
    if (r.cupti) take_cupti_samples(r, k);
    if (r.subtract) {
      for (std::size_t i = before; i < samples.size(); ++i) {
        samples[i] = std::max(0.0, samples[i] - m.event_overhead_ms);
      }
    }
    ++m.batches;
    m.max_batch_used = std::max(m.max_batch_used, k);
    r.per_sample_seconds = b.wall_seconds / static_cast<double>(samples.size() - before);
    if (stop_now(r)) return true;
    r.batch = std::min(r.max_batch, 2 * k);
  }
  return false;
}

// The next batch's size: the doubling batch within the caps, one sample where a persisting
// set-aside needs a reset per sample, and no more than the time left holds.
std::size_t Timer::Impl::batch_size(Measurement& r) {
  const double elapsed = seconds_since(r.t0);
  const std::size_t left_samples = options.max_iterations - r.result.samples_ms.size();
  std::size_t k = std::min({r.batch, r.max_batch, left_samples});
  if (reset_persisting) {
    // A persisting set-aside lets a call keep lines across the flush; with one, each sample
    // gets its own persisting-L2 reset (reset happens once a batch).
    std::size_t set_aside = 0;
    if (cudaDeviceGetLimit(&set_aside, cudaLimitPersistingL2CacheSize) == cudaSuccess &&
        set_aside > 0) {
      r.result.method.persisting_l2_set_aside_bytes = static_cast<std::int64_t>(set_aside);
      k = 1;
    }
    (void)cudaGetLastError();
  }
  if (r.per_sample_seconds > 0) {
    const double left = options.max_seconds - elapsed;
    const auto fit = static_cast<std::size_t>(std::max(1.0, left / r.per_sample_seconds));
    k = std::min(k, fit);
  }
  return k;
}

// The host could not queue the batch before the spin kernel gave up: its samples may hold
// launch gaps. Retry with a smaller batch; a single sample that still times out means the call
// waits on the device (it synchronizes), so the blocking kernel cannot be used.
void Timer::Impl::on_timed_out_batch(Measurement& r, std::size_t k) {
  TimingMethod& m = r.result.method;
  ++m.discarded_batches;
  if (r.cupti) (void)r.session->take();
  if (k > 1) {
    r.batch = std::max<std::size_t>(1, k / 2);
    return;
  }
  r.blocking = false;
  m.blocking_note = fmt::format(
      "the blocking kernel timed out ({} ms) with one sample queued: the call waits on the "
      "device (it synchronizes or copies to the host), so its launches could not be "
      "queued ahead; sampled without the blocking kernel (launch latency included)",
      options.blocking_timeout_ms);
  r.result.samples_ms.clear();  // every kept sample is measured the same way
  r.result.kernel_sum_ms.clear();
  r.kept.clear();
  m.batches = 0;
  measure_overhead(r);  // unblocked now, like the samples
}

// Samples taken while the clocks were held down (power cap, thermal, hardware slowdown)
// measure the throttle, not the kernel: drops the batch (true) so that it is redone, a few
// times at most.
bool Timer::Impl::drop_slowed_batch(Measurement& r, std::size_t before) {
  if (!(options.read_clocks && options.max_slowed_batch_retries > 0)) return false;
  const ClockReading now = read_clocks(info, /*reasons_only=*/true);
  if (!now.slowed_down()) {
    r.slowed_in_a_row = 0;
    return false;
  }
  TimingMethod& m = r.result.method;
  if (r.slowed_in_a_row < options.max_slowed_batch_retries) {
    ++r.slowed_in_a_row;
    ++m.slowed_batches_dropped;
    r.result.samples_ms.resize(before);
    if (r.cupti) (void)r.session->take();
    return true;
  }
  // Still slowed after the retries: the device runs this way; keep what it measures.
  m.slowdown_note = fmt::format(
      "a clock slowdown ({}) was still active after {} redone batches; its samples are kept",
      fmt::join(clock_reason_names(*now.clock_reasons), ", "), r.slowed_in_a_row);
  return false;
}

// CUPTI mode: the batch's `k` iterations from their kernel records, each sample the span of
// one iteration's kernels.
void Timer::Impl::take_cupti_samples(Measurement& r, std::size_t k) {
  std::vector<IterationKernels> its = split_iterations(r.session->take());
  if (its.size() != k) {
    throw TimingError(
        TimingError::Kind::kCuptiRecordsLost,
        fmt::format("CUPTI delivered {} of the {} iteration markers of a batch", its.size(), k));
  }
  for (IterationKernels& it : its) {
    if (it.kernels.empty()) {
      throw TimingError(TimingError::Kind::kNoKernels,
                        fmt::format("iteration {} launched no kernel (CUPTI mode times "
                                    "kernels only; a call of copies alone cannot be timed "
                                    "this way)",
                                    r.kept.size() + 1));
    }
    r.kept.push_back(std::move(it));
  }
  if (auto why = kernel_set_mismatch({r.kept.data(), r.kept.size()})) {
    throw TimingError(TimingError::Kind::kKernelSetChanged,
                      "CUPTI mode needs the same kernels in every iteration: " + *why);
  }
  for (std::size_t i = r.kept.size() - k; i < r.kept.size(); ++i) {
    r.result.samples_ms.push_back(r.kept[i].span_ms());
    r.result.kernel_sum_ms.push_back(r.kept[i].sum_ms());
  }
}

// Whether the noise criterion or the time cap stops the sampling (saying which in the method).
bool Timer::Impl::stop_now(Measurement& r) {
  TimingMethod& m = r.result.method;
  const std::vector<double>& samples = r.result.samples_ms;
  if (options.stop && options.stop(std::span<const double>(samples.data(), samples.size()))) {
    m.stop = StopReason::kNoise;
    return true;
  }
  if (samples.size() < options.max_iterations && seconds_since(r.t0) >= options.max_seconds) {
    m.stop = StopReason::kTimeCap;
    return true;
  }
  return false;
}

// A dropped batch's calls are made again under the same indices.
void Timer::Impl::rewind(const Measurement& r) {
  call_index = r.first_timed_index + r.result.samples_ms.size();
  if (options.rewound) options.rewound(call_index);
}

// The method's closing fields, and (CUPTI) the first kept iteration's kernels on a timeline
// starting at its first kernel.
void Timer::Impl::finish(Measurement& r, bool stopped) {
  TimingMethod& m = r.result.method;
  if (!stopped) m.stop = StopReason::kIterationCap;
  m.event_overhead_subtracted = r.subtract;
  m.measure_seconds = seconds_since(r.t0);
  m.iterations = r.result.samples_ms.size();
  m.blocking_kernel = r.blocking;
  if (options.read_clocks) r.result.clocks_after = read_clocks(info);
  if (!r.cupti || r.kept.empty()) return;
  const IterationKernels& first = r.kept.front();
  std::uint64_t origin = first.kernels.front().start_ns;
  for (const KernelRecord& k : first.kernels) origin = std::min(origin, k.start_ns);
  for (const KernelRecord& k : first.kernels) {
    r.result.kernels.push_back({k.name, k.stream_id,
                                static_cast<double>(k.start_ns - origin) * 1e-6,
                                static_cast<double>(k.end_ns - k.start_ns) * 1e-6});
  }
}

Timer::Timer(int device, cudaStream_t stream, TimingOptions options)
    : impl_(std::make_unique<Impl>(device, stream, std::move(options))) {}

Timer::~Timer() = default;

TimingResult Timer::measure(const Call& call) { return impl_->measure(call); }
WindowAudit Timer::audit_window(const Call& call, std::size_t iterations) {
  return impl_->audit_window(call, iterations);
}
const TimingOptions& Timer::options() const { return impl_->options; }
TimingOptions& Timer::options() { return impl_->options; }
const DeviceInfo& Timer::device() const { return impl_->info; }
std::int64_t Timer::flush_bytes() const {
  return impl_->flush_buffer ? static_cast<std::int64_t>(impl_->flush_buffer->bytes()) : 0;
}

}  // namespace fib::cuda
