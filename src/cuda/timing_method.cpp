// Names, descriptions, errors and JSON of GPU timing (include/fib/cuda/timing.h).
#include "fib/cuda/timing.h"

#include <algorithm>

namespace fib::cuda {

std::optional<TimingOptions> gpu_timer_options(std::string_view name) {
  if (std::find(kGpuTimerNames.begin(), kGpuTimerNames.end(), name) == kGpuTimerNames.end()) {
    return std::nullopt;
  }
  TimingOptions o;
  o.mode = name == "cupti" ? TimingMode::kCupti : TimingMode::kEvents;
  o.subtract_event_overhead = name == "events";
  return o;
}

std::string_view timing_mode_name(TimingMode mode) {
  switch (mode) {
    case TimingMode::kEvents:
      return "cuda_events";
    case TimingMode::kCupti:
      return "cupti";
    case TimingMode::kGraph:
      return "cuda_graph";
  }
  return "unknown";
}

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kNoise:
      return "noise";
    case StopReason::kIterationCap:
      return "iterations";
    case StopReason::kTimeCap:
      return "time";
  }
  return "unknown";
}

std::string_view timing_error_kind_name(TimingError::Kind kind) {
  switch (kind) {
    case TimingError::Kind::kCuptiUnavailable:
      return "cupti_unavailable";
    case TimingError::Kind::kCuptiRecordsLost:
      return "cupti_records_lost";
    case TimingError::Kind::kKernelSetChanged:
      return "kernel_set_changed";
    case TimingError::Kind::kNoKernels:
      return "no_kernels";
    case TimingError::Kind::kNotCapturable:
      return "not_capturable";
  }
  return "unknown";
}

std::string describe(const TimingOptions& options) {
  std::string text;
  switch (options.mode) {
    case TimingMode::kEvents:
      text = "CUDA events around each call";
      break;
    case TimingMode::kCupti:
      text =
          "CUPTI kernel activity of every kernel each call launches, on any stream, from the "
          "first kernel's start to the last kernel's end";
      break;
    case TimingMode::kGraph:
      text = "CUDA events around launches of the call captured once into a CUDA graph";
      break;
  }
  if (options.blocking_kernel) text += ", queued behind a blocking kernel";
  if (options.l2_flush) {
    text +=
        ", the L2 flushed (2x its size, write then read) and persisting lines reset before each "
        "call";
  }
  // CUPTI reads the kernels' own timestamps: no event pair is around the call.
  if (options.mode != TimingMode::kCupti) {
    text += options.subtract_event_overhead ? "; the empty event pair's cost subtracted"
                                            : "; the empty event pair's cost not subtracted";
  }
  return text;
}

TimingError::TimingError(Kind kind, std::string message)
    : fib::Error("", std::move(message)), kind_(kind) {}

Json to_json(const TimingMethod& m) {
  Json j{{"mode", timing_mode_name(m.mode)},
         {"device", m.device},
         {"device_name", m.device_name},
         {"l2_flush", m.l2_flush},
         {"flush_bytes", m.flush_bytes},
         {"persisting_l2_reset", m.persisting_l2_reset},
         {"warmup", m.warmup},
         {"blocking_kernel", m.blocking_kernel},
         {"iterations", m.iterations},
         {"batches", m.batches},
         {"discarded_batches", m.discarded_batches},
         {"slowed_batches_dropped", m.slowed_batches_dropped},
         {"max_batch_used", m.max_batch_used},
         {"stop", stop_reason_name(m.stop)},
         {"measure_seconds", m.measure_seconds},
         {"warmup_seconds", m.warmup_seconds}};
  if (m.warmup_requested > m.warmup) j["warmup_requested"] = m.warmup_requested;
  if (m.event_overhead_ms > 0) {
    j["event_overhead_ms"] = m.event_overhead_ms;
    j["event_overhead_subtracted"] = m.event_overhead_subtracted;
  }
  if (!m.blocking_note.empty()) j["blocking_note"] = m.blocking_note;
  if (!m.slowdown_note.empty()) j["slowdown_note"] = m.slowdown_note;
  if (m.persisting_l2_set_aside_bytes > 0) {
    j["persisting_l2_set_aside_bytes"] = m.persisting_l2_set_aside_bytes;
  }
  return j;
}

Json to_json(const TimingResult& r) {
  Json j{{"method", to_json(r.method)},
         {"clocks_before", to_json(r.clocks_before)},
         {"clocks_after", to_json(r.clocks_after)},
         {"samples_ms", r.samples_ms}};
  if (!r.kernel_sum_ms.empty()) j["kernel_sum_ms"] = r.kernel_sum_ms;
  if (!r.kernels.empty()) {
    Json ks = Json::array();
    for (const CallKernel& k : r.kernels) {
      ks.push_back({{"name", k.name},
                    {"stream_id", k.stream_id},
                    {"start_ms", k.start_ms},
                    {"duration_ms", k.duration_ms}});
    }
    j["kernels"] = std::move(ks);
  }
  return j;
}

}  // namespace fib::cuda
