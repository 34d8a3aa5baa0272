#include "bind.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "fib/trace/workload.h"

namespace fib::import {
namespace {

// FlashInfer's parameter names for what definitions call otherwise: the wrappers' plan() takes
// the index tensors by these names, and run() takes the paged cache as one (k, v) tuple.
struct Alias {
  std::string_view input;
  std::array<std::string_view, 2> parameters;
};
constexpr std::array<Alias, 5> kAliases = {{
    {"kv_indptr", {"indptr", "paged_kv_indptr"}},
    {"kv_indices", {"indices", "paged_kv_indices"}},
    {"kv_last_page_len", {"last_page_len", "paged_kv_last_page_len"}},
    {"k_cache", {"paged_kv_cache__0", "kv_cache__0"}},
    {"v_cache", {"paged_kv_cache__1", "kv_cache__1"}},
}};

const Tensor* find_tensor(const Call& call, const std::string& name) {
  if (auto it = call.tensors.find(name); it != call.tensors.end()) return &it->second;
  for (const Alias& a : kAliases) {
    if (a.input != name) continue;
    for (std::string_view p : a.parameters)
      if (auto it = call.tensors.find(std::string(p)); it != call.tensors.end()) return &it->second;
  }
  return nullptr;
}

// The templates name some inputs otherwise than the API's parameters (rmsnorm's hidden_states is
// its `input`): such an input takes the tensor argument at its place among the tensor inputs,
// unless that argument's name belongs to another input. Shapes and dtypes still have to fit.
const Tensor* by_position(const Definition& def, const TensorSpec& spec, const Call& call,
                          Binding& b) {
  std::size_t position = 0;
  for (const TensorSpec& s : def.inputs) {
    if (&s == &spec) break;
    if (!s.is_scalar()) ++position;
  }
  if (position >= call.tensor_order.size()) return nullptr;
  const std::string& name = call.tensor_order[position];
  if (def.input(name)) return nullptr;
  b.notes.push_back(fmt::format("{} <- {} (by position)", spec.name, name));
  return &call.tensors.at(name);
}

bool is_integer(DType t) {
  return t == DType::kInt32 || t == DType::kInt64 || t == DType::kInt16 || t == DType::kInt8 ||
         t == DType::kUInt8;
}

// Fixes the axes of one tensor's shape; false with *why on a clash.
bool bind_shape(const Definition& def, const TensorSpec& spec, const Tensor& t, AxisValues& vars,
                std::string* why) {
  const std::vector<std::string>& shape = *spec.shape;
  if (t.rank() != shape.size()) {
    *why = fmt::format("$.inputs.{}: rank {}, the definition's is {}", spec.name, t.rank(),
                       shape.size());
    return false;
  }
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const Axis* axis = def.axis(shape[i]);
    const std::int64_t n = t.dim(i);
    if (axis->kind == AxisKind::kConst) {
      if (axis->value != n) {
        *why = fmt::format("$.inputs.{}.shape[{}]: {}, the definition's const axis {} is {}",
                           spec.name, i, n, axis->name, axis->value.value_or(0));
        return false;
      }
      continue;
    }
    if (const auto bound = axis_value(vars, axis->name); bound && *bound != n) {
      *why = fmt::format("$.inputs.{}.shape[{}]: {}, but axis {} is {} from an earlier input",
                         spec.name, i, n, axis->name, *bound);
      return false;
    }
    if (!axis_value(vars, axis->name)) vars.emplace_back(axis->name, n);
  }
  return true;
}

bool bind_input(const Definition& def, const TensorSpec& spec, const Call& call, Binding& b,
                std::string* why) {
  if (spec.is_scalar()) {
    const auto it = call.scalars.find(spec.name);
    if (it == call.scalars.end()) {
      *why = fmt::format("$.inputs.{}: the call passed no number for this scalar", spec.name);
      return false;
    }
    b.scalars.emplace_back(spec.name, it->second);
    return true;
  }
  const Tensor* t = find_tensor(call, spec.name);
  if (!t) t = by_position(def, spec, call, b);
  if (!t) {
    *why = fmt::format("$.inputs.{}: no such tensor among the call's arguments", spec.name);
    return false;
  }
  if (t->dtype() != spec.dtype) {
    *why = fmt::format("$.inputs.{}: dtype {}, the definition's is {}", spec.name,
                       dtype_name(t->dtype()), dtype_name(spec.dtype));
    return false;
  }
  if (!bind_shape(def, spec, *t, b.axes, why)) return false;
  b.tensors.emplace_back(spec.name, *t);
  return true;
}

const Tensor* bound_tensor(const Binding& b, std::string_view name) {
  for (const auto& [n, t] : b.tensors)
    if (n == name) return &t;
  return nullptr;
}

std::optional<Scalar> element(const Binding& b, std::string_view name,
                              std::span<const std::int64_t> index) {
  const Tensor* t = bound_tensor(b, name);
  if (!t || index.size() != t->rank()) return std::nullopt;
  std::int64_t flat = 0;
  for (std::size_t i = 0; i < index.size(); ++i) {
    const std::int64_t at = index[i] < 0 ? index[i] + t->dim(i) : index[i];
    if (at < 0 || at >= t->dim(i)) return std::nullopt;
    flat = flat * t->dim(i) + at;
  }
  const double v = t->get(flat);
  if (t->dtype() == DType::kBool) return Scalar(v != 0);
  if (is_integer(t->dtype())) return Scalar(static_cast<std::int64_t>(v));
  return Scalar(v);
}

void check_index_tensor(const std::string& name, const Tensor& t, const AxisValues& axes,
                        std::vector<std::string>& out) {
  if (!is_integer(t.dtype()) || t.rank() != 1) return;
  if (name.ends_with("indptr")) {
    if (t.numel() > 0 && t.get(0) != 0)
      out.push_back(fmt::format("{}[0] is {}, an indptr starts at 0", name, t.get(0)));
    for (std::int64_t i = 1; i < t.numel(); ++i)
      if (t.get(i) < t.get(i - 1)) {
        out.push_back(fmt::format("{}[{}] = {} < {}[{}] = {}: an indptr never decreases", name, i,
                                  t.get(i), name, i - 1, t.get(i - 1)));
        return;
      }
  }
  const auto pages = axis_value(axes, "num_pages");
  if (name.ends_with("indices") && pages) {
    for (std::int64_t i = 0; i < t.numel(); ++i)
      if (t.get(i) < 0 || t.get(i) >= static_cast<double>(*pages)) {
        out.push_back(fmt::format("{}[{}] = {} is outside the {} pages [0, {})", name, i, t.get(i),
                                  *pages, *pages));
        return;
      }
  }
}

}  // namespace

bool names_api(const Definition& def, std::string_view function_name) {
  const std::size_t dot = function_name.rfind('.');
  const std::string_view method =
      dot == std::string_view::npos ? "" : function_name.substr(dot + 1);
  const std::string_view owner = function_name.substr(0, dot);
  for (const std::string& api : def.tag_values("fi_api")) {
    const std::string_view a = api;
    const auto names = [&](std::string_view n) {
      return a == n || (a.size() > n.size() && a.ends_with(n) && a[a.size() - n.size() - 1] == '.');
    };
    if (names(function_name)) return true;
    if ((method == "run" || method == "forward") && names(owner)) return true;
  }
  return false;
}

std::optional<Binding> bind(const Definition& def, const Call& call, std::string* why) {
  Binding b;
  for (const TensorSpec& spec : def.inputs)
    if (!bind_input(def, spec, call, b, why)) return std::nullopt;
  AxisValues ordered;
  for (const Axis& a : def.axes) {
    if (a.kind == AxisKind::kConst) continue;
    const auto v = axis_value(b.axes, a.name);
    if (!v) {
      *why = fmt::format("$.axes.{}: no input's shape fixes this var axis", a.name);
      return std::nullopt;
    }
    ordered.emplace_back(a.name, *v);
  }
  b.axes = std::move(ordered);
  return b;
}

std::vector<std::string> sanitize(const Definition& def, const Binding& b) {
  std::vector<std::string> out;
  const AxisValues bound = def.bind_axes(b.axes).value_or(b.axes);
  const WorkloadConstraintEnv env(
      def, bound, [&b](std::string_view n, auto index) { return element(b, n, index); });
  for (const Constraint& c : def.parsed_constraints) {
    const ConstraintResult r = c.evaluate(env);
    if (r.verdict == Verdict::kViolated || r.verdict == Verdict::kError)
      out.push_back(fmt::format("constraint '{}' does not hold: {}", c.text(), r.detail));
  }
  for (const auto& [name, t] : b.tensors) check_index_tensor(name, t, bound, out);
  return out;
}

}  // namespace fib::import
