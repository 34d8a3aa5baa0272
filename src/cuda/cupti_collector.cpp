// CUPTI Activity API collection of kernel records (src/cuda/cupti_collector.h). CUPTI hands out
// activity buffers through two global callbacks, so the state here is process-wide.
#include "cuda/cupti_collector.h"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <fmt/format.h>

namespace fib::cuda::detail {

namespace {

// The newest kernel record of the CUPTI this is built with; the fields read here (start, end,
// streamId, correlationId, name) sit at the same offsets in every CUpti_ActivityKernel version.
#if CUPTI_API_VERSION >= 130000
using KernelActivity = CUpti_ActivityKernel10;
#else
using KernelActivity = CUpti_ActivityKernel9;
#endif

constexpr std::size_t kBufferBytes = 8u << 20;
// Every forced flush (one per batch of timed calls) hands CUPTI's buffer back, and the next kernel
// launch asks for a new one. Unless told the buffer comes zeroed, CUPTI zeroes all 8 MiB of it
// inside that launch, on the host, while the timed calls are being queued: about 0.6 ms per
// batch on an H100 host (docs/gpu-timing.md, "What the timer costs"). So buffers are handed over
// zeroed (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER): fresh ones from calloc, whose pages
// the kernel maps zeroed on first touch, and delivered ones kept for reuse, up to this many, with
// the part CUPTI wrote zeroed again on delivery.
constexpr std::size_t kKeptBuffers = 4;

struct State {
  std::mutex session;  // held by the CuptiKernelSession alive
  std::mutex records_mutex;
  std::vector<KernelRecord> records;
  std::size_t dropped = 0;
  bool callbacks_registered = false;
  std::string register_error;
  std::mutex buffers_mutex;
  std::vector<uint8_t*> free_buffers;  // delivered, ready for reuse
};

State& state() {
  static State s;
  return s;
}

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == nullptr) return fmt::format("{}", +r);
  return fmt::format("{} ({})", s, +r);
}

std::string demangle(const char* name) {
  if (name == nullptr) return "<unnamed>";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                           std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  State& s = state();
  *buffer = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.buffers_mutex);
    if (!s.free_buffers.empty()) {
      *buffer = s.free_buffers.back();
      s.free_buffers.pop_back();
    }
  }
  // CUPTI asks for 8-byte alignment; calloc's is 16 bytes on the platforms fib builds for.
  if (*buffer == nullptr) *buffer = static_cast<uint8_t*>(std::calloc(1, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

// Back to the pool (zeroed where CUPTI wrote, so every kept buffer is zero throughout), or freed.
void release_buffer(uint8_t* buffer, std::size_t written) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.buffers_mutex);
    if (s.free_buffers.size() < kKeptBuffers) {
      // Past the valid bytes too, by a margin: a record CUPTI began but did not count must not
      // be left for the next fill to find.
      constexpr std::size_t kMargin = 4096;
      std::memset(buffer, 0, std::min(written + kMargin, kBufferBytes));
      s.free_buffers.push_back(buffer);
      return;
    }
  }
  std::free(buffer);
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                               size_t /*size*/, size_t valid_size) {
  State& s = state();
  if (buffer == nullptr) return;
  std::vector<KernelRecord> got;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
      continue;
    }
    const auto* k = reinterpret_cast<const KernelActivity*>(record);
    KernelRecord r;
    r.name = demangle(k->name);
    r.correlation_id = k->correlationId;
    r.start_ns = k->start;
    r.end_ns = k->end;
    r.stream_id = k->streamId;
    got.push_back(std::move(r));
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) != CUPTI_SUCCESS) dropped = 0;
  release_buffer(buffer, valid_size);
  std::lock_guard<std::mutex> lock(s.records_mutex);
  s.dropped += dropped;
  for (KernelRecord& r : got) s.records.push_back(std::move(r));
}

}  // namespace

CuptiKernelSession::CuptiKernelSession() : lock_(state().session) {
  State& s = state();
  if (!s.callbacks_registered && s.register_error.empty()) {
    // The buffers come zeroed (see kBufferBytes). Where the attribute is refused, CUPTI zeroes
    // them itself: slower, the same records.
    std::uint8_t zeroed = 1;
    std::size_t zeroed_size = sizeof zeroed;
    (void)cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zeroed_size,
                                    &zeroed);
    const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r == CUPTI_SUCCESS) {
      s.callbacks_registered = true;
    } else {
      s.register_error = "cuptiActivityRegisterCallbacks failed: " + result_text(r);
    }
  }
  if (!s.callbacks_registered) {
    throw TimingError(TimingError::Kind::kCuptiUnavailable,
                      "CUPTI could not be initialized, so kernels cannot be timed through CUPTI "
                      "in this process (" +
                          s.register_error + ")");
  }
  {
    std::lock_guard<std::mutex> lock(s.records_mutex);
    s.records.clear();
    s.dropped = 0;
  }
  const CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    throw TimingError(
        TimingError::Kind::kCuptiUnavailable,
        "CUPTI could not be initialized, so kernels cannot be timed through CUPTI in this "
        "process: cuptiActivityEnable(CONCURRENT_KERNEL) returned " +
            result_text(r) +
            " (GPU profiling not permitted to this user, or another profiler attached?)");
  }
}

CuptiKernelSession::~CuptiKernelSession() {
  (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.records_mutex);
  s.records.clear();
}

std::vector<KernelRecord> CuptiKernelSession::take() {
  State& s = state();
  // Forced: also the buffers that are not full. After a device synchronization every record in
  // them is complete.
  const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) {
    throw TimingError(TimingError::Kind::kCuptiRecordsLost,
                      "cuptiActivityFlushAll failed: " + result_text(r));
  }
  std::lock_guard<std::mutex> lock(s.records_mutex);
  if (s.dropped > 0) {
    throw TimingError(
        TimingError::Kind::kCuptiRecordsLost,
        fmt::format("CUPTI dropped {} kernel records (its buffers were full)", s.dropped));
  }
  std::vector<KernelRecord> out;
  out.swap(s.records);
  for (const KernelRecord& k : out) {
    if (k.start_ns == 0 || k.end_ns < k.start_ns) {
      throw TimingError(TimingError::Kind::kCuptiRecordsLost,
                        fmt::format("CUPTI delivered a record of kernel {} without valid "
                                    "timestamps (start {}, end {})",
                                    k.name, k.start_ns, k.end_ns));
    }
  }
  return out;
}

}  // namespace fib::cuda::detail
