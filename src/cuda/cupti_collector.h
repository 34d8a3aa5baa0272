// Process-wide collection of kernel activity records through CUPTI's Activity API (internal to
// fib_cuda; the CUPTI timing mode in timing.cu uses it).
#pragma once

#include <mutex>
#include <vector>

#include "fib/cuda/timing.h"

namespace fib::cuda::detail {

// While alive, records every kernel the process runs (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, any
// stream). One session at a time per process: the constructor waits for a running one to end.
// Throws TimingError(kCuptiUnavailable) when CUPTI cannot be started.
class CuptiKernelSession {
 public:
  CuptiKernelSession();
  ~CuptiKernelSession();
  CuptiKernelSession(const CuptiKernelSession&) = delete;
  CuptiKernelSession& operator=(const CuptiKernelSession&) = delete;

  // Delivers every buffered record (call it after synchronizing the device, so every record is
  // complete) and returns the records collected since the last take(). Throws
  // TimingError(kCuptiRecordsLost) when CUPTI dropped records or handed over one without
  // timestamps.
  std::vector<KernelRecord> take();

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace fib::cuda::detail
