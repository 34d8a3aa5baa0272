// Workload: concrete axis values and how to obtain each input (random, scalar, safetensors).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fib/trace/constraint.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"

namespace fib {

enum class InputKind : std::uint8_t { kRandom, kScalar, kSafetensors };
std::string_view input_kind_name(InputKind k);

struct WorkloadInput {
  std::string name;
  InputKind kind = InputKind::kRandom;
  Scalar value = std::int64_t{0};  // kScalar
  std::string path;                // kSafetensors: relative to the dataset root
  std::string tensor_key;          // kSafetensors
  KeyOrder key_order;
};

struct Workload {
  std::string uuid;
  AxisValues axes;  // var axes only, in file order
  std::vector<WorkloadInput> inputs;
  KeyOrder key_order;

  const WorkloadInput* input(std::string_view name) const;
};

std::optional<Workload> workload_from_json(const Json& j, const JsonPath& path,
                                           const ReadContext& ctx);
Json to_json(const Workload& w);

// Checks a workload against its definition: every var axis given, none extra, all positive;
// input names exactly the definition's; scalars given as scalars and tensors as random or
// safetensors; constraints that depend on axes alone hold. Returns false on an error.
bool check_workload(const Definition& def, const Workload& w, const JsonPath& path,
                    const ReadContext& ctx);

// A ConstraintEnv over a definition and a workload's axes; tensor contents come from
// `elements` when given (e.g. a loaded safetensors blob), else are unknown.
class WorkloadConstraintEnv : public ConstraintEnv {
 public:
  using ElementFn =
      std::function<std::optional<Scalar>(std::string_view, std::span<const std::int64_t>)>;
  WorkloadConstraintEnv(const Definition& def, AxisValues bound, ElementFn elements = {});
  std::optional<std::int64_t> axis(std::string_view name) const override;
  std::optional<std::vector<std::int64_t>> tensor_shape(std::string_view name) const override;
  std::optional<Scalar> tensor_element(std::string_view name,
                                       std::span<const std::int64_t> index) const override;
  bool is_tensor(std::string_view name) const override;
  std::optional<Scalar> scalar(std::string_view name) const override;
  // Makes the workload's scalar inputs visible to constraints (e.g. `sm_scale > 0`).
  void set_scalars(const Workload& w);

 private:
  const Definition& def_;
  AxisValues bound_;
  ElementFn elements_;
  std::vector<std::pair<std::string, Scalar>> scalars_;
};

}  // namespace fib
