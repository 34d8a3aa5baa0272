// Fuzz target: arbitrary text -> Constraint::parse -> evaluate against a small environment.
//
// The environment has ordinary axes, extreme ones (0, negative, INT64_MAX, INT64_MIN) and
// tensors of several ranks whose contents are known (ints, floats, bools), unknown, or whose
// shape is unknown, so parsing, arithmetic, indexing, attributes, methods and calls all meet
// edge cases. Invariants: parse and evaluate never throw or crash, a refused text comes with a
// message that names a column, an accepted one names only identifiers from the text, and
// evaluation is deterministic.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fib/trace/constraint.h"
#include "fuzz_common.h"

namespace {

using fib::Scalar;
using fib::fuzz::check;
using fib::fuzz::die;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

class FuzzEnv : public fib::ConstraintEnv {
 public:
  std::optional<std::int64_t> axis(std::string_view name) const override {
    static const std::pair<std::string_view, std::int64_t> kAxes[] = {
        {"batch_size", 4}, {"len_indptr", 5},    {"num_pages", 0}, {"page_size", 64},
        {"topk", 2048},    {"neg", -3},          {"big", kMax},    {"small", kMin},
        {"one", 1},        {"num_kv_indices", 9}};
    for (const auto& [n, v] : kAxes) {
      if (n == name) return v;
    }
    return std::nullopt;
  }
  std::optional<std::vector<std::int64_t>> tensor_shape(std::string_view name) const override {
    if (name == "kv_indptr") return std::vector<std::int64_t>{5};
    if (name == "q") return std::vector<std::int64_t>{4, 8, 16};
    if (name == "sm_scale") return std::vector<std::int64_t>{};
    if (name == "mask") return std::vector<std::int64_t>{2};
    if (name == "empty") return std::vector<std::int64_t>{0, 3};
    if (name == "huge") return std::vector<std::int64_t>{kMax, kMax, 2};
    if (name == "opaque") return std::vector<std::int64_t>{3};
    return std::nullopt;  // "shapeless" and non-tensors
  }
  std::optional<Scalar> tensor_element(std::string_view name,
                                       std::span<const std::int64_t> index) const override {
    const auto shape = tensor_shape(name);
    if (!shape || index.size() != shape->size()) die("element asked with a partial index", name);
    for (std::size_t i = 0; i < index.size(); ++i) {
      if (index[i] < 0 || index[i] >= (*shape)[i]) die("element index out of range", name);
    }
    if (name == "kv_indptr") return Scalar{std::int64_t{3} * index[0]};
    if (name == "sm_scale") return Scalar{0.125};
    if (name == "mask") return Scalar{index[0] == 0};
    if (name == "q" && index[0] == 3) return Scalar{kMax};
    if (name == "q") return Scalar{1.5 * static_cast<double>(index[2])};
    if (name == "huge") return Scalar{kMin};
    return std::nullopt;  // contents not at hand
  }
  bool is_tensor(std::string_view name) const override {
    return tensor_shape(name).has_value() || name == "shapeless";
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string error;
  std::optional<fib::Constraint> c;
  try {
    c = fib::Constraint::parse(text, &error);
  } catch (const std::exception& e) {
    die("Constraint::parse threw", e.what());
  }
  if (!c) {
    check(error.rfind("column ", 0) == 0, "a syntax error without a column", error);
    return 0;
  }
  check(c->text() == text, "text() differs from the parsed text");
  for (const auto& n : c->names()) {
    check(!n.empty() && text.find(n) != std::string_view::npos, "a name not in the text", n);
  }
  static const FuzzEnv env;
  try {
    const auto r1 = c->evaluate(env);
    const auto r2 = c->evaluate(env);
    check(r1.verdict == r2.verdict && r1.detail == r2.detail, "evaluation is not deterministic");
    if (r1.verdict == fib::Verdict::kUnknown || r1.verdict == fib::Verdict::kError) {
      check(!r1.detail.empty(), "an unknown or error verdict without a reason");
    }
    (void)fib::scalar_to_string(Scalar{1.5});
  } catch (const std::exception& e) {
    die("Constraint::evaluate threw", e.what());
  }
  return 0;
}
