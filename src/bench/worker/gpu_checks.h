// The CUDA worker's own kernels (src/bench/worker/gpu_checks.cu): poisoning outputs and the
// check after every call (input hashes, guard regions). Internal to fib_bench, CUDA builds only.
// Their names start with fib_timing_, so the GPU timer's CUPTI views leave them out of a call's
// kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fib/bench/inputs/device_pool.h"
#include "fib/cuda/runtime.h"

namespace fib::bench::detail::gpu {

inline constexpr std::size_t kGuardBytes = 256;
inline constexpr unsigned char kGuardByte = 0xFD;
// Inputs are hashed in chunks of this many bytes, one block at a time.
inline constexpr std::uint64_t kHashChunkBytes = 1u << 16;
// Outputs (destination-passing) or allocations (value-returning) whose guards one check covers.
inline constexpr int kMaxGuards = 32;

struct CheckedInput {  // one input tensor of a set, in device memory (8-byte aligned)
  const void* data;
  unsigned long long bytes;
  unsigned long long expected;  // its hash when the set was uploaded
};

struct GuardRegion {  // the kGuardBytes before and after one output
  const unsigned char* before;
  const unsigned char* after;
};

enum : int { kCheckOk = 0, kCheckGuard = 1, kCheckInput = 2 };
struct CheckFailure {  // in device memory; the first failure of a measurement
  int kind;
  int index;         // which output (guard) or input (hash)
  long long offset;  // guard: the first corrupted byte relative to the data (negative: before)
  unsigned long long call;
};

struct CheckPlan {
  CheckedInput* inputs = nullptr;  // device array
  int num_inputs = 0;
  unsigned long long* chunk_starts = nullptr;  // device array, num_inputs + 1 (prefix sums)
  unsigned long long total_chunks = 0;
  unsigned long long* partial = nullptr;  // device array, num_inputs, zero between checks
  unsigned int* counter = nullptr;        // device, zero between checks
  // The guards travel inside the kernel's parameters (by value), so a call's guard list needs
  // no upload; a value-returning solution's allocations change from call to call.
  GuardRegion guards[kMaxGuards] = {};
  int num_guards = 0;
  CheckFailure* failure = nullptr;  // device
  int max_blocks = 256;
};

// Fills [data, data + bytes) with a `width`-byte (1, 2 or 4) little-endian pattern.
void launch_fill(void* data, std::size_t bytes, std::uint32_t pattern, int width,
                 cudaStream_t stream);
// Hashes every input of the plan and checks every guard region, in one launch; the last block
// compares the hashes with the expected ones (or, with store_expected, stores them) and resets
// the partial sums. The first failure goes to plan.failure with `call`.
void launch_check(const CheckPlan& plan, unsigned long long call, bool store_expected,
                  cudaStream_t stream);

// dst[r][m][c] = src[rows(r)][m][cols(c)] for a tensor seen as [R, M, C] units of `unit` bytes
// (1, 2, 4 or 8): a timing input set's tensor made on the device from a checked one
// (fib/bench/inputs/device_pool.h).
void launch_permute(const void* src, void* dst, AffinePermutation rows, unsigned long long middle,
                    AffinePermutation cols, int unit, cudaStream_t stream);

}  // namespace fib::bench::detail::gpu
