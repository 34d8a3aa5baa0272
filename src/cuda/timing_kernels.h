// Launchers of the GPU timer's own kernels (src/cuda/timing.cu; internal to fib_cuda).
#pragma once

#include <cstddef>

#include "fib/cuda/runtime.h"

namespace fib::cuda::detail {

// The blocking kernel: holds `stream` until the host writes a non-zero device_flag[0] (host-mapped
// memory) or `timeout_ms` of GPU time pass; on a timeout it sets device_flag[1].
void launch_spin(cudaStream_t stream, int* device_flag, double timeout_ms);
// The L2 flush: a write pass over [buffer, buffer + bytes) (bytes a multiple of 16), then a read
// pass. `sink`: 4 writable device bytes.
void launch_flush(cudaStream_t stream, void* buffer, std::size_t bytes, int value, void* sink,
                  int sm_count);
// The CUPTI mode's iteration marker (an empty kernel named fib_timing_marker).
void launch_marker(cudaStream_t stream);
// The window audit's closing marker (an empty kernel named fib_timing_window_end).
void launch_window_end(cudaStream_t stream);

}  // namespace fib::cuda::detail
