// Input synthesis on a CUDA device: the bulk fills (include/fib/tensor/counter_random.h) made
// by kernels directly in device memory, bit-identical to the host's make_bulk_fill, so large
// weights and activations need not be made on the CPU and copied.
#pragma once

#include <map>
#include <string>

#include "fib/cuda/runtime.h"
#include "fib/tensor/inputs.h"

namespace fib::cuda {

// Makes `fill` in new device memory on `stream` (asynchronous: the tensor is ready once the
// stream's work so far is done). The bytes are those make_bulk_fill(fill) gives on the host.
DeviceTensor make_bulk_fill(const BulkFill& fill, cudaStream_t stream);

// A workload's inputs with the bulk fills made on the device: `host` holds the structure
// (indices, page tables, routing, probabilities), the scalars and the notes, as
// materialize_inputs makes them; `device` the tensors of host.deferred.
struct DeviceInputs {
  MaterializedInputs host;
  std::map<std::string, DeviceTensor, std::less<>> device;
};
// materialize_inputs with its bulk fills deferred, then made on `stream` (waited for).
DeviceInputs materialize_inputs_on_device(const Definition& def, const Workload& w,
                                          MaterializeOptions options, cudaStream_t stream);

}  // namespace fib::cuda
