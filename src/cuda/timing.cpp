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

  TimingResult measure(const Call& call);
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
  const TimingMode mode = options.mode;
  const bool cupti = mode == TimingMode::kCupti;
  TimingResult result;
  TimingMethod& m = result.method;
  m.mode = mode;
  m.device = device;
  m.device_name = info.name;
  m.l2_flush = options.l2_flush;
  if (options.l2_flush) {
    ensure_flush_buffer();
    m.flush_bytes = static_cast<std::int64_t>(flush_buffer->bytes());
    // Where the reset is refused (some virtualized devices), the method says there was none.
    reset_persisting = persisting_supported() && cudaCtxResetPersistingL2Cache() == cudaSuccess;
    (void)cudaGetLastError();
    m.persisting_l2_reset = reset_persisting;
  } else {
    reset_persisting = false;
  }
  const int warmup = std::max(options.warm ? 0 : 1, options.warmup);
  m.warmup_requested = warmup;
  FIB_CUDA_CHECK(cudaDeviceSynchronize());

  // The work each sample times: the call itself, or one launch of its graph.
  cudaGraphExec_t exec = nullptr;
  struct GraphGuard {
    cudaGraphExec_t* exec;
    ~GraphGuard() {
      if (*exec) (void)cudaGraphExecDestroy(*exec);
    }
  } graph_guard{&exec};
  std::function<void(cudaStream_t)> work = std::cref(call);
  if (mode == TimingMode::kGraph) {
    warm(call, 1);  // module load and lazy setup stay out of the capture
    exec = capture(call);
    work = [&exec](cudaStream_t s) { FIB_CUDA_CHECK(cudaGraphLaunch(exec, s)); };
    FIB_CUDA_CHECK(cudaGraphUpload(exec, stream));
  }
  const auto warm0 = std::chrono::steady_clock::now();
  m.warmup = warm(work, warmup, options.max_warmup_seconds);
  m.warmup_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - warm0).count();
  const std::size_t first_timed_index = call_index;

  bool blocking = options.blocking_kernel;
  // What an empty event pair reads here (same flush, same blocking kernel): the events' own
  // cost, recorded, and subtracted from the samples when asked.
  auto measure_overhead = [&] {
    m.event_overhead_ms = 0;
    if (cupti) return;
    std::vector<double> empty;
    const std::function<void(cudaStream_t)> nothing = [](cudaStream_t) {};
    const BatchOutcome ob =
        run_batch(kOverheadSamples, blocking, false, nothing, empty, /*hooks=*/false);
    if (!ob.timed_out) m.event_overhead_ms = median_of(empty);
  };
  measure_overhead();
  bool subtract = !cupti && options.subtract_event_overhead && m.event_overhead_ms > 0;

  if (options.read_clocks) result.clocks_before = read_clocks(info);
  std::unique_ptr<detail::CuptiKernelSession> session;
  if (cupti) session = std::make_unique<detail::CuptiKernelSession>();

  std::vector<double>& samples = result.samples_ms;
  std::vector<IterationKernels> kept;  // CUPTI: every kept iteration's kernels
  std::size_t batch = 1;
  double per_sample_seconds = 0;
  const std::size_t max_batch = std::max<std::size_t>(1, options.max_batch);
  const auto t0 = Clock::now();
  bool stopped = false;
  int slowed_in_a_row = 0;
  while (samples.size() < options.max_iterations) {
    const double elapsed = seconds_since(t0);
    std::size_t k = std::min({batch, max_batch, options.max_iterations - samples.size()});
    if (reset_persisting) {
      // A persisting set-aside lets a call keep lines across the flush; with one, each sample
      // gets its own persisting-L2 reset (reset happens once a batch).
      std::size_t set_aside = 0;
      if (cudaDeviceGetLimit(&set_aside, cudaLimitPersistingL2CacheSize) == cudaSuccess &&
          set_aside > 0) {
        m.persisting_l2_set_aside_bytes = static_cast<std::int64_t>(set_aside);
        k = 1;
      }
      (void)cudaGetLastError();
    }
    if (per_sample_seconds > 0) {
      const double left = options.max_seconds - elapsed;
      const auto fit = static_cast<std::size_t>(std::max(1.0, left / per_sample_seconds));
      k = std::min(k, fit);
    }
    const std::size_t before = samples.size();
    // A dropped batch's calls are made again under the same indices.
    auto rewind = [&] {
      call_index = first_timed_index + samples.size();
      if (options.rewound) options.rewound(call_index);
    };
    const BatchOutcome b = run_batch(k, blocking, cupti, work, samples);
    if (b.timed_out) {
      // The host could not queue the batch before the spin kernel gave up: its samples may hold
      // launch gaps. Retry with a smaller batch; a single sample that still times out means the
      // call waits on the device (it synchronizes), so the blocking kernel cannot be used.
      ++m.discarded_batches;
      if (cupti) (void)session->take();
      if (k > 1) {
        batch = std::max<std::size_t>(1, k / 2);
      } else {
        blocking = false;
        m.blocking_note = fmt::format(
            "the blocking kernel timed out ({} ms) with one sample queued: the call waits on the "
            "device (it synchronizes or copies to the host), so its launches could not be "
            "queued ahead; sampled without the blocking kernel (launch latency included)",
            options.blocking_timeout_ms);
        samples.clear();  // every kept sample is measured the same way
        result.kernel_sum_ms.clear();
        kept.clear();
        m.batches = 0;
        measure_overhead();  // unblocked now, like the samples
        subtract = !cupti && options.subtract_event_overhead && m.event_overhead_ms > 0;
      }
      rewind();
      continue;
    }
    // Samples taken while the clocks were held down (power cap, thermal, hardware slowdown)
    // measure the throttle, not the kernel: drop the batch and redo it, a few times at most.
    if (options.read_clocks && options.max_slowed_batch_retries > 0) {
      const ClockReading now = read_clocks(info, /*reasons_only=*/true);
      if (now.slowed_down()) {
        if (slowed_in_a_row < options.max_slowed_batch_retries) {
          ++slowed_in_a_row;
          ++m.slowed_batches_dropped;
          samples.resize(before);
          if (cupti) (void)session->take();
          rewind();
          continue;
        }
        // Still slowed after the retries: the device runs this way; keep what it measures.
        m.slowdown_note = fmt::format(
            "a clock slowdown ({}) was still active after {} redone batches; its samples are kept",
            fmt::join(clock_reason_names(*now.clock_reasons), ", "), slowed_in_a_row);
      } else {
        slowed_in_a_row = 0;
      }
    }
    if (cupti) {
      std::vector<IterationKernels> its = split_iterations(session->take());
      if (its.size() != k) {
        throw TimingError(TimingError::Kind::kCuptiRecordsLost,
                          fmt::format("CUPTI delivered {} of the {} iteration markers of a batch",
                                      its.size(), k));
      }
      for (IterationKernels& it : its) {
        if (it.kernels.empty()) {
          throw TimingError(TimingError::Kind::kNoKernels,
                            fmt::format("iteration {} launched no kernel (CUPTI mode times "
                                        "kernels only; a call of copies alone cannot be timed "
                                        "this way)",
                                        kept.size() + 1));
        }
        kept.push_back(std::move(it));
      }
      if (auto why = kernel_set_mismatch({kept.data(), kept.size()})) {
        throw TimingError(TimingError::Kind::kKernelSetChanged,
                          "CUPTI mode needs the same kernels in every iteration: " + *why);
      }
      for (std::size_t i = kept.size() - k; i < kept.size(); ++i) {
        samples.push_back(kept[i].span_ms());
        result.kernel_sum_ms.push_back(kept[i].sum_ms());
      }
    }
    if (subtract) {
      for (std::size_t i = before; i < samples.size(); ++i) {
        samples[i] = std::max(0.0, samples[i] - m.event_overhead_ms);
      }
    }
    ++m.batches;
    m.max_batch_used = std::max(m.max_batch_used, k);
    per_sample_seconds = b.wall_seconds / static_cast<double>(samples.size() - before);
    if (options.stop && options.stop(std::span<const double>(samples.data(), samples.size()))) {
      m.stop = StopReason::kNoise;
      stopped = true;
      break;
    }
    if (samples.size() < options.max_iterations && seconds_since(t0) >= options.max_seconds) {
      m.stop = StopReason::kTimeCap;
      stopped = true;
      break;
    }
    batch = std::min(max_batch, 2 * k);
  }
  if (!stopped) m.stop = StopReason::kIterationCap;
  m.event_overhead_subtracted = subtract;
  m.measure_seconds = seconds_since(t0);
  m.iterations = samples.size();
  m.blocking_kernel = blocking;
  if (options.read_clocks) result.clocks_after = read_clocks(info);

  if (cupti && !kept.empty()) {
    const IterationKernels& first = kept.front();
    std::uint64_t origin = first.kernels.front().start_ns;
    for (const KernelRecord& k : first.kernels) origin = std::min(origin, k.start_ns);
    for (const KernelRecord& k : first.kernels) {
      result.kernels.push_back({k.name, k.stream_id,
                                static_cast<double>(k.start_ns - origin) * 1e-6,
                                static_cast<double>(k.end_ns - k.start_ns) * 1e-6});
    }
  }
  return result;
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
