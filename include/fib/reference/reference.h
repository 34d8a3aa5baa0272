// Native reference kernels: ground truth for every op family of the corpus, without Python.
// Each family is one implementation, parametrized by the definition's axes and bound to its
// inputs by name; the registry picks the one that covers a definition.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fib/tensor/tensor.h"
#include "fib/trace/constraint.h"
#include "fib/trace/definition.h"

namespace fib::reference {

// The inputs of one call, by name (never by position). Absent optional inputs are missing.
struct Arguments {
  std::map<std::string, Tensor, std::less<>> tensors;
  std::map<std::string, Scalar, std::less<>> scalars;

  bool has(std::string_view name) const;
  // Throws fib::Error naming the input when it is missing.
  const Tensor& tensor(std::string_view name) const;
  double scalar_double(std::string_view name) const;
  std::int64_t scalar_int(std::string_view name) const;
};

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

// Numeric constants a definition's Python reference fixes that are not in its interface
// (e.g. `EPS = 1e-5`), by name. Kernels read what they need from here, so one implementation
// serves every definition of a family.
std::map<std::string, double, std::less<>> reference_constants(const Definition& def);

}  // namespace fib::reference
