// Device memory for a solution's outputs with inaccessible address space around it (CUDA
// builds): the driver's virtual memory management reserves a range, maps physical memory only
// over the output's own granules and leaves a granule unmapped before and after, so a write past
// the guard bytes is an illegal address (a sticky error: the worker is replaced and the solution
// gets RUNTIME_ERROR) instead of landing in other memory. Freed outputs are unmapped and their
// physical memory released, but their addresses stay reserved for the worker's lifetime: a late
// writer faults instead of reaching memory handed to the next solution. Where the driver has no
// virtual memory management, outputs fall back to ordinary allocations with guard bytes only;
// output_guard_kind() says which, and the trace records it.
#pragma once

#ifdef FIB_HAVE_CUDA

#include <cstddef>
#include <memory>
#include <string>

namespace fib::bench::detail {

class GuardedDeviceRange {
 public:
  // A range of at least `bytes` mapped on `device` between unmapped granules; nullptr where the
  // driver has no virtual memory management (or the reservation fails).
  static std::unique_ptr<GuardedDeviceRange> make(int device, std::size_t bytes);
  ~GuardedDeviceRange();
  GuardedDeviceRange(const GuardedDeviceRange&) = delete;
  GuardedDeviceRange& operator=(const GuardedDeviceRange&) = delete;

  void* data() const { return mapped_; }
  std::size_t size() const { return mapped_bytes_; }

 private:
  GuardedDeviceRange() = default;
  void* mapped_ = nullptr;
  std::size_t mapped_bytes_ = 0;
  unsigned long long handle_ = 0;  // CUmemGenericAllocationHandle
};

// "unmapped pages" where outputs get GuardedDeviceRanges on `device`, else "guard bytes".
std::string output_guard_kind(int device);

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
