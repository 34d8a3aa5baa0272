// The arguments of one solution call in the solution ABI's terms (fib/solution.h): tensor views
// of an input set's inputs and of the outputs, scalar values, and the poison an output holds
// before a call. Host and device memory alike: a view says where its data lives. Every runtime's
// call backend (call_backend.h) starts from these values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fib/bench/protocol/poison.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/definition.h"
#define FIB_SOLUTION_C_API_ONLY
#include "fib/solution.h"

namespace fib::bench::detail {

// A row-major view of `data` for the solution ABI (host memory unless `device_type` says CUDA).
fib_tensor contiguous_view(void* data, DType dtype, const Shape& shape,
                           std::int32_t device_type = FIB_DEVICE_CPU, std::int32_t device_id = 0);

using Scalars = std::map<std::string, Scalar, std::less<>>;

// The ABI value of scalar input `spec` from a set's scalars (FIB_VALUE_ABSENT when not given):
// bools as bools, integers as integers (and as floats where the input is a float), doubles.
fib_value scalar_value(const TensorSpec& spec, const Scalars& scalars);

// One input set as a call sees it: views of its tensors (in host or device memory), by name,
// and its scalars.
struct InputViews {
  std::map<std::string, fib_tensor, std::less<>> tensors;
  const Scalars* scalars = nullptr;
};

// The call's arguments: the definition's inputs in order (absent where the set lacks an optional
// one), then `outputs` (destination-passing; empty for value-returning solutions).
std::vector<fib_value> build_arguments(const Definition& def, const InputViews& in,
                                       const std::vector<fib_tensor>& outputs);

}  // namespace fib::bench::detail
