// Honest GPU timing of one call: the timer the `fib run` worker calls per evaluation.
// docs/gpu-timing.md describes the method; in short:
//
// - Event mode (the default figure): before each timed call the L2 is flushed (a write pass then
//   a read pass over a device buffer twice the L2's size) and, where the device has persisting
//   L2, the persisting lines are reset; a batch of samples is queued behind a blocking kernel
//   that spins on a host-mapped flag, so host launch latency stays out; each sample is the
//   elapsed time between CUDA events around the call.
// - CUPTI mode: every kernel the call launches, on any stream, recorded by the CUPTI Activity
//   API; a sample runs from the first kernel's start to the last kernel's end (the sum of the
//   kernel durations is kept too). Every iteration must launch the same kernel set.
// - CUDA-graph mode: the call captured once into a graph, graph launches timed with events. A
//   separate, labelled figure (launch-free), never the default.
//
// Samples are milliseconds. Errors a caller should record rather than crash on (CUPTI not
// usable, a kernel set that changes between iterations, a call that cannot be captured) are
// thrown as TimingError with a kind and a message that says what happened.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fib/cuda/clocks.h"
#include "fib/cuda/runtime.h"
#include "fib/trace/json_reader.h"

namespace fib::cuda {

enum class TimingMode : std::uint8_t {
  kEvents,  // events around each call, behind a blocking kernel (default)
  kCupti,   // kernel activity records of every kernel the call launches
  kGraph,   // the call captured into a CUDA graph; graph launches timed with events
};
// "cuda_events", "cupti", "cuda_graph".
std::string_view timing_mode_name(TimingMode mode);

// Why sampling stopped: the stop predicate was satisfied (noise), or a cap was reached.
enum class StopReason : std::uint8_t { kNoise, kIterationCap, kTimeCap };
std::string_view stop_reason_name(StopReason reason);  // "noise", "iterations", "time"

// Enqueues the work to time on the given stream. It may fork work onto other streams, as long
// as that work is joined back to the given stream (events) before it returns.
using Call = std::function<void(cudaStream_t)>;
// Called on the host around each call the timer makes (warmup and timed), outside the timed
// window; `index` counts the calls of one measurement from 0 (warmup first). What a hook
// enqueues on the stream runs in order with the calls: `before_call` ahead of the L2 flush and
// the start event (e.g. poisoning outputs, choosing the next input set), `after_call` behind the
// end event (e.g. guard checks, copying a checked call's outputs aside).
using CallHook = std::function<void(cudaStream_t, std::size_t index)>;
// Given the samples so far (milliseconds, in order), whether they are precise enough to stop.
// fib_bench's noise criterion is passed in this way (fib_cuda sits below fib_bench).
using StopPredicate = std::function<bool(std::span<const double> samples_ms)>;

struct TimingOptions {
  TimingMode mode = TimingMode::kEvents;
  // Untimed calls before the first sample; at least one always runs (the first call includes
  // module load and lazy initialization), unless `warm`.
  int warmup = 3;
  // The same calls ran just before on this stream (a later trial of one evaluation): module
  // load and lazy setup are done and the clocks are up, so `warmup` may be 0.
  bool warm = false;
  // When > 0, the warmup stops early once its calls have taken this long (wall time, after one
  // call at least): a 300 ms kernel needs one call to load its module and raise the clocks, not
  // ten. TimingMethod::warmup says how many ran.
  double max_warmup_seconds = 0;
  std::size_t max_iterations = 100;  // cap on samples
  double max_seconds = 1.0;          // cap on the timed phase's wall time (warmup not counted)
  StopPredicate stop;                // empty: sample up to a cap
  bool l2_flush = true;              // flush the L2 (and reset persisting lines) before each call
  // Queue each batch of samples behind a kernel that spins on a host flag. When the call cannot
  // be queued (it waits on the device), the timer falls back to unblocked timing and says so in
  // TimingMethod::blocking_note.
  bool blocking_kernel = true;
  std::size_t max_batch = 16;         // samples queued behind one blocking kernel at most
  double blocking_timeout_ms = 1000;  // the blocking kernel gives up after this (GPU time)
  bool read_clocks = true;            // NVML clocks/temperature/power before and after
  // Events and graph modes measure what an empty event pair reads under the same flush and
  // blocking kernel (TimingMethod::event_overhead_ms, about a microsecond). When set, that is
  // subtracted from every sample (clamped at 0), which brings short kernels in line with a
  // profiler's kernel duration; off, samples are the raw event times.
  bool subtract_event_overhead = false;
  CallHook before_call, after_call;  // empty: none
  // Called when the timer drops samples it took (a batch redone: the blocking kernel timed out,
  // or the clocks were slowed) and its call index goes back to `index`, the first dropped
  // call: the calls from there are made again and keep their places in the caller's plan, so a
  // call index always names a kept sample or one still to come.
  std::function<void(std::size_t index)> rewound;  // empty: none
  // After each batch the clocks are read (NVML); a batch that ends with a slowdown reason active
  // (power cap, thermal or hardware slowdown) is dropped and redone, at most this many times in a
  // row (then its samples are kept, and TimingMethod::slowdown_note says so). 0: keep everything.
  int max_slowed_batch_retries = 3;
};
// What a timer with these options measures, in words, as a trace records it: the clock (CUDA
// events, CUPTI kernel activity or graph launches), the blocking kernel, the L2 flush and, for
// event timing, whether the empty event pair's cost is subtracted.
std::string describe(const TimingOptions& options);

// The GPU timers `fib run --gpu-timer` names: "events" (CUDA events, the empty event pair's cost
// subtracted), "events-raw" (not subtracted) and "cupti" (every kernel the call launches, on any
// stream).
inline constexpr std::array<std::string_view, 3> kGpuTimerNames = {"events", "events-raw", "cupti"};
// The options of the named timer, as far as they change what is measured (the mode and the
// event-pair subtraction; the rest stays at its defaults); nullopt for an unknown name.
std::optional<TimingOptions> gpu_timer_options(std::string_view name);

// How a result was measured, as the trace records it.
struct TimingMethod {
  TimingMode mode = TimingMode::kEvents;
  int device = 0;
  std::string device_name;
  bool l2_flush = false;
  std::int64_t flush_bytes = 0;      // bytes touched by each flush (write pass, then read)
  bool persisting_l2_reset = false;  // cudaCtxResetPersistingL2Cache before each batch
  std::int64_t persisting_l2_set_aside_bytes = 0;  // a set-aside seen (then one sample a batch)
  int warmup = 0;                                  // untimed calls made
  int warmup_requested = 0;      // calls asked for (more than `warmup` when the time cap cut it)
  bool blocking_kernel = false;  // whether samples were queued behind a blocking kernel
  std::string blocking_note;     // why not, when it was asked for but not used
  std::size_t iterations = 0;    // samples kept
  std::size_t batches = 0;       // batches kept
  std::size_t discarded_batches = 0;       // batches redone (the blocking kernel timed out)
  std::size_t slowed_batches_dropped = 0;  // batches redone (a clock slowdown was active)
  std::string slowdown_note;               // samples kept despite a slowdown, and why
  std::size_t max_batch_used = 0;
  StopReason stop = StopReason::kIterationCap;
  double measure_seconds = 0;  // wall time of the timed phase
  double warmup_seconds = 0;   // wall time of the warmup calls (including their flushes)
  // Events/graph modes: median of an empty event pair measured the same way (0: not measured),
  // and whether it was subtracted from the samples.
  double event_overhead_ms = 0;
  bool event_overhead_subtracted = false;
};
Json to_json(const TimingMethod& m);

// One kernel of a call, as CUPTI saw it (CUPTI mode).
struct CallKernel {
  std::string name;             // demangled where possible
  std::uint32_t stream_id = 0;  // CUPTI's stream id
  double start_ms = 0;          // from the start of the call's first kernel
  double duration_ms = 0;
};

struct TimingResult {
  std::vector<double> samples_ms;
  // CUPTI mode: per iteration, the sum of the call's kernel durations (overlap counted twice),
  // and the kernels of the first timed iteration, in launch order.
  std::vector<double> kernel_sum_ms;
  std::vector<CallKernel> kernels;
  TimingMethod method;
  ClockReading clocks_before, clocks_after;  // NVML, around the timed phase
};
// The method, clocks, kernels and samples.
Json to_json(const TimingResult& r);

class TimingError : public fib::Error {
 public:
  enum class Kind : std::uint8_t {
    kCuptiUnavailable,  // CUPTI could not be initialized (not permitted, another profiler...)
    kCuptiRecordsLost,  // CUPTI dropped or did not deliver records
    kKernelSetChanged,  // an iteration launched different kernels than the first
    kNoKernels,         // CUPTI mode: an iteration launched no kernel
    kNotCapturable,     // graph mode: the call could not be captured
  };
  TimingError(Kind kind, std::string message);
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};
std::string_view timing_error_kind_name(TimingError::Kind kind);

// The window audit (Timer::audit_window): whether every kernel a call launches, on any stream,
// runs inside the call's window on the timer's stream. Work forked onto another stream and not
// joined back, or launched on a stream not ordered after the timer's, escapes the window: event
// timing would not see it and a checked output could be read before it is written.
struct WindowAudit {
  bool available = false;  // CUPTI could be used
  std::string note;        // why not, when unavailable
  std::size_t iterations = 0;
  // The first escape found: "kernel K (stream S) of call 2 started 35.2 us before the call's
  // window opened" / "... ended 12.0 us after the call's window closed".
  std::optional<std::string> escape;
  std::vector<CallKernel> kernels;  // the first call's kernels (start relative to the window)
};

// A timer bound to one device and one stream. It owns the flush buffer (allocated once, 2x the
// L2), the host-mapped flag of the blocking kernel and its events. Not thread-safe; CUPTI mode
// measurements are serialized process-wide (CUPTI's activity buffers are global).
class Timer {
 public:
  Timer(int device, cudaStream_t stream, TimingOptions options = {});
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Warms up, then samples `call` as options().mode says. Throws TimingError (see above) and
  // CudaError/StickyError for CUDA failures (a call that faults).
  TimingResult measure(const Call& call);
  // Runs `call` `iterations` times (with the options' hooks, no flush) under CUPTI, each call
  // between a marker kernel that opens its window and one that closes it on the timer's stream,
  // all queued behind the blocking kernel when the options ask for it (so work that is not
  // ordered after the opening marker runs before it, visibly). Never throws for CUPTI being
  // unusable (available = false); throws CudaError/StickyError for CUDA failures.
  WindowAudit audit_window(const Call& call, std::size_t iterations);

  const TimingOptions& options() const;
  TimingOptions& options();  // to change mode, caps or the predicate between measurements
  const DeviceInfo& device() const;
  std::int64_t flush_bytes() const;  // 0 until a flush was needed

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- CUPTI records and the kernel-set rule (pure logic; tested without a GPU) -----------------

// The timer's own kernels are named with this prefix (the blocking kernel, the flush passes and
// the iteration marker) and left out of every call's kernels.
inline constexpr std::string_view kInternalKernelPrefix = "fib_timing_";
inline constexpr std::string_view kMarkerKernelName = "fib_timing_marker";
bool is_internal_kernel(std::string_view name);

struct KernelRecord {
  std::string name;
  std::uint32_t correlation_id = 0;  // CUPTI's id of the launching API call (monotonic)
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint32_t stream_id = 0;
};

struct IterationKernels {
  std::vector<KernelRecord> kernels;  // the call's kernels, in launch (correlation id) order
  double span_ms() const;             // first start to last end
  double sum_ms() const;              // sum of durations
};

// Splits records of a run at its marker kernels (one is launched before each call): iteration i
// holds the non-internal kernels launched after marker i and before marker i+1. Records before
// the first marker are dropped.
std::vector<IterationKernels> split_iterations(std::vector<KernelRecord> records);
inline constexpr std::string_view kWindowEndKernelName = "fib_timing_window_end";
// The audit's rule over one run's records: markers (kMarkerKernelName) open windows, window-end
// kernels close them; every non-internal kernel launched in between must start at or after the
// opening marker's end and end at or before the closing kernel's start. The first violation,
// worded as in WindowAudit::escape, or nullopt. `kernels` receives the first window's kernels.
std::optional<std::string> window_escape(std::vector<KernelRecord> records,
                                         std::vector<CallKernel>* kernels = nullptr,
                                         std::size_t* windows = nullptr);
// "{a,b x2}": the kernel names, sorted, with counts.
std::string kernel_set_text(const IterationKernels& it);
// When some iteration launched a different kernel set (names and counts) than the first, the
// message for the first such one: "iteration 7 launched {a,b} but iteration 1 launched {a}".
// `first_number` is the number of iterations[0] (1-based).
std::optional<std::string> kernel_set_mismatch(std::span<const IterationKernels> iterations,
                                               std::size_t first_number = 1);

}  // namespace fib::cuda
