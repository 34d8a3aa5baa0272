// Definition: a kernel's interface (axes, inputs, outputs, constraints) and its reference.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fib/trace/constraint.h"
#include "fib/trace/dtype.h"
#include "fib/trace/json_reader.h"

namespace fib {

enum class AxisKind : std::uint8_t { kConst, kVar };

struct Axis {
  std::string name;
  AxisKind kind = AxisKind::kVar;
  std::optional<std::int64_t> value;  // set for const axes
  std::optional<std::string> description;
  KeyOrder key_order;
};

// A tensor (shape = list of axis names, possibly empty for 0-D) or a scalar (shape = null).
struct TensorSpec {
  std::string name;
  std::optional<std::vector<std::string>> shape;  // nullopt: a scalar
  DType dtype = DType::kFloat32;
  std::optional<std::string> description;
  std::optional<bool> optional;  // the input may be omitted (passed as None)
  KeyOrder key_order;

  bool is_scalar() const { return !shape.has_value(); }
  bool is_optional() const { return optional.value_or(false); }
};

// Concrete values of a definition's axes, in definition order.
using AxisValues = std::vector<std::pair<std::string, std::int64_t>>;
std::optional<std::int64_t> axis_value(const AxisValues& values, std::string_view name);

struct Definition {
  std::string name;
  std::string op_type;
  std::optional<std::string> description;
  std::vector<std::string> tags;
  std::vector<Axis> axes;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::string reference;
  std::vector<std::string> constraints;
  KeyOrder key_order;

  // Parsed `constraints`, index-aligned (filled by definition_from_json).
  std::vector<Constraint> parsed_constraints;

  const Axis* axis(std::string_view n) const;
  const TensorSpec* input(std::string_view n) const;
  const TensorSpec* output(std::string_view n) const;
  const TensorSpec* tensor(std::string_view n) const;  // input or output
  std::vector<std::string> var_axes() const;
  std::vector<std::string> input_names() const;
  bool has_tag(std::string_view tag) const;
  // Tags with a "prefix:" (e.g. "model:"), values only.
  std::vector<std::string> tag_values(std::string_view prefix) const;

  // Const axes plus the given var values; nullopt if a var axis is missing.
  std::optional<AxisValues> bind_axes(const AxisValues& var_values) const;
  // Concrete shape of a tensor spec under bound axes (empty for scalars); nullopt if unbound.
  std::optional<std::vector<std::int64_t>> concrete_shape(const TensorSpec& spec,
                                                          const AxisValues& bound) const;
};

// Parses and checks a definition's structure: unknown/missing fields, types, dtypes, undefined
// shape axes, const axes without a value, input/output name overlap, constraint syntax and the
// names constraints use. A definition that passes is safe to use.
std::optional<Definition> definition_from_json(const Json& j, const ReadContext& ctx);
Json to_json(const Definition& d);

// Checks the reference against the interface: a top-level `run` whose parameters are exactly
// the inputs, in input order (upstream calls run() positionally, so an order mismatch binds
// the wrong tensors there even though fib binds by name). Returns false on an error.
bool check_definition_reference(const Definition& d, const ReadContext& ctx);

// A scale a scalar input's description states as "1/sqrt(N)" (the last one when it gives
// several, as in "1/sqrt(128 + 64) = 1/sqrt(192)"), with the text it was read from.
struct DescribedScale {
  double value = 0;
  std::string text;  // "1/sqrt(192)"
};
std::optional<DescribedScale> described_inverse_sqrt(const TensorSpec& spec);

// Numeric constants the reference assigns on lines of their own (`EPS = 1e-5`), in source order;
// `text` is the literal as written. Validation compares them across a family; native references
// read the ones the interface does not carry.
struct ReferenceConstant {
  std::string name;
  double value = 0;
  std::string text;
};
std::vector<ReferenceConstant> reference_constant_assignments(const Definition& def);

// Reads and parses one definition file; throws fib::Error with every finding on failure.
Definition load_definition(const std::string& path);

}  // namespace fib
