// The CUDA worker's device state (CUDA builds): the device, its stream and timer, the checked-
// output writer, and the workload's input sets on the device (uploaded once per workload, the
// pool's timing sets made there), each with the table the check kernel hashes.
#pragma once

#ifdef FIB_HAVE_CUDA

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checked_writer.h"
#include "fib/cuda/runtime.h"
#include "fib/cuda/timing.h"
#include "fib/reference_cuda/reference_cuda.h"
#include "gpu_checks.h"
#include "worker_common.h"

namespace fib::bench::detail {

// Raw device bytes (a DeviceTensor of uint8).
cuda::DeviceTensor device_bytes(std::size_t n);

// One input set on the device, with the table the check kernel hashes.
struct DeviceSet {
  reference_cuda::DeviceArguments args;  // tensors on the device, scalars on the host
  std::vector<std::string> names;        // inputs in check-table order
  cuda::DeviceTensor table, chunk_starts, partial;
  unsigned long long total_chunks = 0;
};

class GpuWorker {
 public:
  explicit GpuWorker(int device);

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_->get(); }
  cuda::Timer& timer() { return *timer_; }
  // Writes checked outputs while the next trial runs (its staging memory kept across requests).
  CheckedOutputWriter& writer() { return *writer_; }

  // The device copies of `host` (uploaded when the workload changes, or after a solution
  // modified one; the fills the file carries made here, each distinct one once), then the
  // pool's sets made from them on the device, with their hashes (taken on the device once the
  // set is made: what every call's check holds the inputs against).
  const std::vector<DeviceSet>& sets(const std::string& path, const InputSets& host,
                                     const DevicePool& pool, double* upload_ms);
  // Sets [0, file_sets) came from the file (the host holds them); the rest were made here.
  std::size_t file_sets() const {
    return sets_.size() - static_cast<std::size_t>(sets_pool_.count);
  }
  void mark_sets_dirty() { sets_dirty_ = true; }
  bool sets_dirty() const { return sets_dirty_; }

  // Whether the call of this solution (its library and entry point) was found to wait on the
  // device; kept while the worker lives, for DeviceRunner.
  bool& call_waits_on_device(const std::string& solution_key) { return call_waits_[solution_key]; }

  // The check of a call on set `d` with these guard regions.
  gpu::CheckPlan plan(const DeviceSet& d, const std::vector<gpu::GuardRegion>& guards);
  // The first failure the check kernel recorded since the last take (synchronizes).
  gpu::CheckFailure take_failure();

 private:
  // The check table of a set whose tensors are on the device (in d.names order), and its
  // inputs' hashes, stored as the expected ones. Input k with `from_source[k]` set is the pool
  // source's own buffer (a shared weight): its table entry, hash included, is the source's,
  // not hashed again.
  DeviceSet finish_set(DeviceSet d, const DeviceSet* source = nullptr,
                       const std::vector<bool>& from_source = {});
  cuda::DeviceTensor upload(const void* data, std::size_t bytes);
  void clear_failure();

  int device_;
  std::unique_ptr<cuda::Stream> stream_;
  std::unique_ptr<cuda::Timer> timer_;
  std::unique_ptr<CheckedOutputWriter> writer_;
  cuda::DeviceTensor counter_, failure_;
  std::string sets_path_;
  DevicePool sets_pool_;
  bool sets_dirty_ = false;
  std::vector<DeviceSet> sets_;
  std::map<std::string, bool> call_waits_;
};

// The worker's device for a request's "device" ("cuda:N"), started on first use; a worker serves
// one device.
GpuWorker& gpu_state(WorkerState& st, const std::string& device);

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
