// The constraint language: Python-style boolean expressions over a definition's axes and
// tensors, e.g. `len_indptr == batch_size + 1` or `num_kv_indices == kv_indptr[-1].item()`.
// Parsed once into a tree and evaluated against a workload's axes and, when tensor contents are
// at hand, against the data itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace fib {

// A scalar value in the language: Python int, float or bool.
using Scalar = std::variant<std::int64_t, double, bool>;
std::string scalar_to_string(const Scalar& s);

// What an expression can see. Names are axes or tensors (inputs/outputs).
class ConstraintEnv {
 public:
  virtual ~ConstraintEnv() = default;
  virtual std::optional<std::int64_t> axis(std::string_view name) const = 0;
  // A scalar input's value (e.g. sm_scale), when known.
  virtual std::optional<Scalar> scalar(std::string_view /*name*/) const { return std::nullopt; }
  // Shape of a tensor, or nullopt when `name` is not a tensor (or its shape is unknown).
  virtual std::optional<std::vector<std::int64_t>> tensor_shape(std::string_view name) const = 0;
  // Element at a full index (row-major); nullopt when the contents are not at hand.
  virtual std::optional<Scalar> tensor_element(std::string_view name,
                                               std::span<const std::int64_t> index) const = 0;
  virtual bool is_tensor(std::string_view name) const = 0;
};

enum class Verdict : std::uint8_t {
  kHolds,
  kViolated,
  kUnknown,  // needs tensor contents that are not available
  kError,    // the expression cannot be evaluated (unknown name, index out of range, ...)
};

struct ConstraintResult {
  Verdict verdict = Verdict::kUnknown;
  // For kViolated: the comparison with values, e.g. "num_kv_indices (7) == kv_indptr[-1].item()
  // (9)". For kUnknown/kError: why.
  std::string detail;
};

struct ConstraintNode;

class Constraint {
 public:
  // Parses `text`; on a syntax error returns nullopt and sets *error to a message with the
  // column ("column 14: expected ')'").
  static std::optional<Constraint> parse(std::string_view text, std::string* error);

  const std::string& text() const { return text_; }
  // Root names the expression refers to (axes and tensors), in first-use order.
  const std::vector<std::string>& names() const { return names_; }
  ConstraintResult evaluate(const ConstraintEnv& env) const;

 private:
  std::string text_;
  std::shared_ptr<const ConstraintNode> root_;
  std::vector<std::string> names_;
};

}  // namespace fib
