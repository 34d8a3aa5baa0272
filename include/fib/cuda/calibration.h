// Kernels of known cost, for checking timers: a kernel that waits a given wall time on the GPU's
// global timer, an empty kernel, and a read-only pass over a buffer. Used by the timing tests
// and the Nsight Compute agreement check (benchmarks/gpu). Their names start with "fib_calib_"
// (plain extern "C" names, so profilers and CUPTI show them as written).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fib/cuda/runtime.h"

namespace fib::cuda::calibration {

// One thread that spins until `nanoseconds` have passed on %globaltimer (the GPU's wall clock,
// independent of the SM clock). Kernel name: fib_calib_sleep.
void launch_sleep(cudaStream_t stream, std::uint64_t nanoseconds);
// An empty kernel (one thread). Kernel name: fib_calib_empty.
void launch_empty(cudaStream_t stream);
// Reads [data, data + bytes) once with 16-byte loads across the whole device (bytes a multiple
// of 16). Each thread writes its XOR of what it read to `sink` only when it equals an unlikely
// constant, so the reads cannot be optimized away (`sink`: 4 writable bytes). Kernel name:
// fib_calib_read.
void launch_read(cudaStream_t stream, const void* data, std::size_t bytes, void* sink,
                 int sm_count);

}  // namespace fib::cuda::calibration
