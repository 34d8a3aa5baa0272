#include "fib/onboard/dedup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

namespace fib::onboard {

namespace {

std::string shape_text(const TensorSpec& s) {
  if (!s.shape) return "scalar";
  return fmt::format("[{}]", fmt::join(*s.shape, ", "));
}

std::string axis_text(const Axis& a) {
  if (a.kind == AxisKind::kConst) return fmt::format("const {}", a.value.value_or(-1));
  return "var";
}

// Compares two ordered tensor lists; returns the first difference.
std::string compare_specs(const std::vector<TensorSpec>& a, const std::vector<TensorSpec>& b,
                          std::string_view what) {
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i >= a.size()) return fmt::format("{} '{}' is extra", what, b[i].name);
    if (i >= b.size()) return fmt::format("{} '{}' is missing", what, a[i].name);
    if (a[i].name != b[i].name) {
      return fmt::format("{} {} is '{}' vs '{}' (names or order differ)", what, i, a[i].name,
                         b[i].name);
    }
    if (a[i].shape != b[i].shape) {
      return fmt::format("{} '{}' shape {} vs {}", what, a[i].name, shape_text(a[i]),
                         shape_text(b[i]));
    }
    if (a[i].dtype != b[i].dtype) {
      return fmt::format("{} '{}' dtype {} vs {}", what, a[i].name, dtype_name(a[i].dtype),
                         dtype_name(b[i].dtype));
    }
  }
  return {};
}

}  // namespace

bool same_kernel(const Definition& a, const Definition& b, std::string* difference) {
  auto differ = [&](std::string why) {
    if (difference) *difference = std::move(why);
    return false;
  };
  if (a.op_type != b.op_type)
    return differ(fmt::format("op_type '{}' vs '{}'", a.op_type, b.op_type));
  // Axes are a set: their order in the file carries no meaning.
  std::map<std::string, const Axis*> axes_a, axes_b;
  for (const auto& x : a.axes) axes_a[x.name] = &x;
  for (const auto& x : b.axes) axes_b[x.name] = &x;
  for (const auto& [name, x] : axes_a) {
    auto it = axes_b.find(name);
    if (it == axes_b.end())
      return differ(fmt::format("axis '{}' ({}) is missing", name, axis_text(*x)));
    const Axis& y = *it->second;
    if (x->kind != y.kind || (x->kind == AxisKind::kConst && x->value != y.value)) {
      return differ(fmt::format("axis '{}' {} vs {}", name, axis_text(*x), axis_text(y)));
    }
  }
  for (const auto& [name, y] : axes_b) {
    if (!axes_a.count(name))
      return differ(fmt::format("axis '{}' ({}) is extra", name, axis_text(*y)));
  }
  if (auto d = compare_specs(a.inputs, b.inputs, "input"); !d.empty()) return differ(std::move(d));
  if (auto d = compare_specs(a.outputs, b.outputs, "output"); !d.empty())
    return differ(std::move(d));
  return true;
}

std::string interface_fingerprint(const Definition& d) {
  std::vector<std::string> axes;
  for (const auto& a : d.axes) axes.push_back(fmt::format("{}={}", a.name, axis_text(a)));
  std::sort(axes.begin(), axes.end());
  auto specs = [](const std::vector<TensorSpec>& list) {
    std::vector<std::string> out;
    for (const auto& s : list)
      out.push_back(fmt::format("{}:{}:{}", s.name, shape_text(s), dtype_name(s.dtype)));
    return out;
  };
  return fmt::format("{}|{}|{}|{}", d.op_type, fmt::join(axes, ","),
                     fmt::join(specs(d.inputs), ","), fmt::join(specs(d.outputs), ","));
}

bool is_sharing_tag(std::string_view tag) {
  return tag.starts_with("model:") || tag.starts_with("tp:") || tag.starts_with("ep:");
}

std::vector<std::string> missing_sharing_tags(const Definition& existing,
                                              const std::vector<std::string>& wanted) {
  std::vector<std::string> out;
  for (const auto& t : wanted) {
    if (!is_sharing_tag(t) || existing.has_tag(t)) continue;
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

}  // namespace fib::onboard
