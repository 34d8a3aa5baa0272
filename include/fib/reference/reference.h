// Native reference kernels: ground truth for every op family of the corpus, without Python.
// Each family is one implementation, parametrized by the definition's axes and bound to its
// inputs by name; the registry picks the one that covers a definition.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "fib/tensor/tensor.h"
#include "fib/trace/constraint.h"
#include "fib/trace/definition.h"

namespace fib::reference {

// Reports an input a reference needs and was not given (`kind`: "tensor" or "scalar").
[[noreturn]] void throw_missing_input(std::string_view name, std::string_view kind);

// The inputs of one call, by name (never by position). Absent optional inputs are missing. T is
// the tensor type: the host Tensor here, cuda::DeviceTensor for the CUDA references.
template <typename T>
struct NamedArguments {
  std::map<std::string, T, std::less<>> tensors;
  std::map<std::string, Scalar, std::less<>> scalars;

  bool has(std::string_view name) const {
    return tensors.find(name) != tensors.end() || scalars.find(name) != scalars.end();
  }
  // These throw fib::Error naming the input when it is missing.
  const T& tensor(std::string_view name) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw_missing_input(name, "tensor");
    return it->second;
  }
  double scalar_double(std::string_view name) const {
    return std::visit([](auto v) { return static_cast<double>(v); }, scalar(name));
  }
  std::int64_t scalar_int(std::string_view name) const {
    return std::visit([](auto v) { return static_cast<std::int64_t>(v); }, scalar(name));
  }

 private:
  const Scalar& scalar(std::string_view name) const {
    auto it = scalars.find(name);
    if (it == scalars.end()) throw_missing_input(name, "scalar");
    return it->second;
  }
};
using Arguments = NamedArguments<Tensor>;

// Outputs by output name, with the definition's shapes and dtypes.
using Outputs = std::map<std::string, Tensor, std::less<>>;

struct CallContext {
  const Definition& definition;
  AxisValues axes;         // every axis, const and var, bound
  unsigned threads = 0;    // 0: all cores
  std::uint64_t seed = 0;  // for sampling kernels: the random stream to draw from
};

// One op family's reference.
class Kernel {
 public:
  virtual ~Kernel() = default;
  // Stable id, e.g. "gqa_paged.decode", written into traces as the reference used.
  virtual std::string_view id() const = 0;
  // Whether this kernel computes `def`; when not, *why says what does not fit.
  virtual bool supports(const Definition& def, std::string* why) const = 0;
  virtual Outputs run(const CallContext& ctx, const Arguments& args) const = 0;
};

// Every kernel, in lookup order.
const std::vector<std::unique_ptr<Kernel>>& kernels();
// The kernel covering `def`, or nullptr with the reasons (one per candidate of its op_type).
const Kernel* find_kernel(const Definition& def, std::string* why);

// Runs the reference of `def` on `args` with the workload's var axes. Checks that every input
// has the definition's dtype and shape before running and that the outputs do after; throws
// fib::Error otherwise.
Outputs run(const Definition& def, const AxisValues& var_axes, const Arguments& args,
            unsigned threads = 0, std::uint64_t seed = 0);

// The checks around every reference call (CPU and CUDA alike): check_inputs binds the axes and
// checks that every required input is given and each tensor has the definition's dtype and
// shape; check_tensor checks one tensor (`role`: "input" or "output"). Both throw fib::Error.
AxisValues check_inputs(const Definition& def, const AxisValues& var_axes,
                        const std::map<std::string, std::pair<DType, Shape>, std::less<>>& tensors,
                        const std::map<std::string, Scalar, std::less<>>& scalars);
void check_tensor(const Definition& def, const TensorSpec& spec, DType dtype, const Shape& shape,
                  const AxisValues& bound, const char* role);
// The dtype and shape of each tensor argument, for check_inputs.
template <typename T>
std::map<std::string, std::pair<DType, Shape>, std::less<>> tensor_metas(
    const NamedArguments<T>& args) {
  std::map<std::string, std::pair<DType, Shape>, std::less<>> m;
  for (const auto& [name, t] : args.tensors) m.emplace(name, std::make_pair(t.dtype(), t.shape()));
  return m;
}

// Numeric constants a definition's Python reference fixes that are not in its interface
// (e.g. `EPS = 1e-5`), by name. Kernels read what they need from here, so one implementation
// serves every definition of a family.
std::map<std::string, double, std::less<>> reference_constants(const Definition& def);

}  // namespace fib::reference
