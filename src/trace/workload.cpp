#include "fib/trace/workload.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fib/trace/suggest.h"

namespace fib {

namespace {
constexpr std::string_view kWorkloadFields[] = {"uuid", "axes", "inputs"};
constexpr std::string_view kInputFields[] = {"type", "value", "path", "tensor_key"};
constexpr std::string_view kInputKinds[] = {"random", "scalar", "safetensors"};
}  // namespace

std::string_view input_kind_name(InputKind k) { return kInputKinds[static_cast<int>(k)]; }

const WorkloadInput* Workload::input(std::string_view name) const {
  for (const auto& i : inputs) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

std::optional<Workload> workload_from_json(const Json& j, const JsonPath& path,
                                           const ReadContext& ctx) {
  const std::size_t errors_before = ctx.errors;
  const Json* f[3];
  Workload w;
  if (!read_object(j, path, ctx, kWorkloadFields, f, &w.key_order)) return std::nullopt;
  bool ok = true;
  for (int i = 0; i < 3; ++i) ok = require_field(f[i], kWorkloadFields[i], path, ctx) && ok;
  if (f[0]) {
    if (auto v = read_string(*f[0], path.key("uuid"), ctx, false))
      w.uuid = *v;
    else
      ok = false;
  }
  if (f[1]) {
    const JsonPath ap = path.key("axes");
    if (!f[1]->is_object()) {
      ctx.error(ap, fmt::format("expected an object of axis name -> integer, found {}",
                                json_kind(*f[1])));
      ok = false;
    } else {
      for (auto it = f[1]->begin(); it != f[1]->end(); ++it) {
        if (auto v = read_int(it.value(), ap.key(it.key()), ctx)) {
          w.axes.emplace_back(it.key(), *v);
        } else {
          ok = false;
        }
      }
    }
  }
  if (f[2]) {
    const JsonPath ip = path.key("inputs");
    if (!f[2]->is_object()) {
      ctx.error(ip, fmt::format("expected an object of input name -> {{type, ...}}, found {}",
                                json_kind(*f[2])));
      ok = false;
    } else {
      for (auto it = f[2]->begin(); it != f[2]->end(); ++it) {
        const JsonPath p = ip.key(it.key());
        const Json* g[4];
        WorkloadInput in;
        in.name = it.key();
        if (!read_object(it.value(), p, ctx, kInputFields, g, &in.key_order)) {
          ok = false;
          continue;
        }
        if (!require_field(g[0], "type", p, ctx)) {
          ok = false;
          continue;
        }
        auto type = read_string(*g[0], p.key("type"), ctx);
        if (!type) {
          ok = false;
          continue;
        }
        bool iok = true;
        auto forbid = [&](int idx) {
          if (g[idx]) {
            ctx.error(p.key(kInputFields[idx]),
                      fmt::format("field '{}' does not belong to a '{}' input", kInputFields[idx],
                                  *type));
            iok = false;
          }
        };
        if (*type == "random") {
          in.kind = InputKind::kRandom;
          forbid(1);
          forbid(2);
          forbid(3);
        } else if (*type == "scalar") {
          in.kind = InputKind::kScalar;
          forbid(2);
          forbid(3);
          if (require_field(g[1], "value", p, ctx)) {
            const Json& v = *g[1];
            if (v.is_boolean()) {
              in.value = v.get<bool>();
            } else if (v.is_number_integer()) {
              if (auto iv = read_int(v, p.key("value"), ctx))
                in.value = *iv;
              else
                iok = false;
            } else if (v.is_number_float()) {
              in.value = v.get<double>();
            } else {
              ctx.error(p.key("value"),
                        fmt::format("expected a number or boolean, found {}", json_kind(v)));
              iok = false;
            }
          } else {
            iok = false;
          }
        } else if (*type == "safetensors") {
          in.kind = InputKind::kSafetensors;
          forbid(1);
          iok = require_field(g[2], "path", p, ctx) && iok;
          iok = require_field(g[3], "tensor_key", p, ctx) && iok;
          if (g[2]) {
            if (auto v = read_string(*g[2], p.key("path"), ctx, false))
              in.path = *v;
            else
              iok = false;
          }
          if (g[3]) {
            if (auto v = read_string(*g[3], p.key("tensor_key"), ctx, false))
              in.tensor_key = *v;
            else
              iok = false;
          }
        } else {
          ctx.error(p.key("type"), fmt::format("unknown input type '{}'", *type),
                    suggest(*type, kInputKinds));
          iok = false;
        }
        if (iok)
          w.inputs.push_back(std::move(in));
        else
          ok = false;
      }
    }
  }
  if (!ok || ctx.errors != errors_before) return std::nullopt;
  return w;
}

Json to_json(const Workload& w) {
  Json v[3];
  v[0] = w.uuid;
  Json axes = Json::object();
  for (const auto& [n, x] : w.axes) axes[n] = x;
  v[1] = std::move(axes);
  Json inputs = Json::object();
  for (const auto& in : w.inputs) {
    Json g[4];
    g[0] = std::string(input_kind_name(in.kind));
    if (in.kind == InputKind::kScalar) {
      std::visit([&](auto x) { g[1] = x; }, in.value);
    } else if (in.kind == InputKind::kSafetensors) {
      g[2] = in.path;
      g[3] = in.tensor_key;
    }
    static constexpr bool kAlways[] = {true, false, false, false};
    inputs[in.name] = write_object(kInputFields, g, in.key_order, kAlways);
  }
  v[2] = std::move(inputs);
  static constexpr bool kAlways[] = {true, true, true};
  return write_object(kWorkloadFields, v, w.key_order, kAlways);
}

bool check_workload(const Definition& def, const Workload& w, const JsonPath& path,
                    const ReadContext& ctx) {
  bool ok = true;
  const JsonPath ap = path.key("axes");
  const auto vars = def.var_axes();
  for (const auto& v : vars) {
    if (!axis_value(w.axes, v)) {
      ctx.error(ap, fmt::format("missing value for var axis '{}'", v));
      ok = false;
    }
  }
  for (const auto& [n, x] : w.axes) {
    const Axis* a = def.axis(n);
    if (a == nullptr) {
      ctx.error(ap.key(n), fmt::format("'{}' is not an axis of {}", n, def.name), suggest(n, vars));
      ok = false;
    } else if (a->kind == AxisKind::kConst) {
      ctx.error(ap.key(n), fmt::format("'{}' is a const axis ({}) and must not be given", n,
                                       a->value.value_or(0)));
      ok = false;
    } else if (x <= 0) {
      ctx.error(ap.key(n), fmt::format("axis '{}' must be positive, found {}", n, x));
      ok = false;
    }
  }
  const JsonPath ip = path.key("inputs");
  const auto names = def.input_names();
  for (const auto& spec : def.inputs) {
    const WorkloadInput* in = w.input(spec.name);
    if (in == nullptr) {
      if (!spec.is_optional()) {
        ctx.error(ip, fmt::format("missing input '{}'", spec.name),
                  "add it (use {\"type\": \"random\"} to have it generated)");
        ok = false;
      }
      continue;
    }
    if (spec.is_scalar() && in->kind != InputKind::kScalar) {
      ctx.error(ip.key(spec.name).key("type"),
                fmt::format("input '{}' is a scalar in the definition but given as '{}'", spec.name,
                            input_kind_name(in->kind)),
                "use {\"type\": \"scalar\", \"value\": ...}");
      ok = false;
    } else if (!spec.is_scalar() && in->kind == InputKind::kScalar) {
      ctx.error(
          ip.key(spec.name).key("type"),
          fmt::format("input '{}' is a tensor in the definition but given as a scalar", spec.name),
          "use \"random\" or \"safetensors\"");
      ok = false;
    }
    if (in->kind == InputKind::kScalar && spec.is_scalar()) {
      const bool is_bool = std::holds_alternative<bool>(in->value);
      if ((spec.dtype == DType::kBool) != is_bool ||
          (dtype_is_integer(spec.dtype) && std::holds_alternative<double>(in->value))) {
        ctx.error(ip.key(spec.name).key("value"),
                  fmt::format("value {} does not fit dtype {}", scalar_to_string(in->value),
                              dtype_name(spec.dtype)));
        ok = false;
      }
    }
  }
  for (const auto& in : w.inputs) {
    if (def.input(in.name) == nullptr) {
      ctx.error(ip.key(in.name), fmt::format("'{}' is not an input of {}", in.name, def.name),
                suggest(in.name, names));
      ok = false;
    }
  }
  if (!ok) return false;
  // Constraints that can be decided from axes (and shapes) alone.
  auto bound = def.bind_axes(w.axes);
  if (!bound) return ok;
  WorkloadConstraintEnv env(def, *bound);
  env.set_scalars(w);
  for (std::size_t i = 0; i < def.parsed_constraints.size(); ++i) {
    const auto r = def.parsed_constraints[i].evaluate(env);
    if (r.verdict == Verdict::kViolated) {
      ctx.error(ap, fmt::format("violates constraint '{}': {}", def.parsed_constraints[i].text(),
                                r.detail));
      ok = false;
    } else if (r.verdict == Verdict::kError) {
      ctx.error(ap, fmt::format("cannot evaluate constraint '{}': {}",
                                def.parsed_constraints[i].text(), r.detail));
      ok = false;
    }
  }
  return ok;
}

WorkloadConstraintEnv::WorkloadConstraintEnv(const Definition& def, AxisValues bound,
                                             ElementFn elements)
    : def_(def), bound_(std::move(bound)), elements_(std::move(elements)) {}

std::optional<std::int64_t> WorkloadConstraintEnv::axis(std::string_view name) const {
  return axis_value(bound_, name);
}
std::optional<std::vector<std::int64_t>> WorkloadConstraintEnv::tensor_shape(
    std::string_view name) const {
  const TensorSpec* s = def_.tensor(name);
  if (s == nullptr) return std::nullopt;
  return def_.concrete_shape(*s, bound_);
}
std::optional<Scalar> WorkloadConstraintEnv::tensor_element(
    std::string_view name, std::span<const std::int64_t> index) const {
  if (!elements_) return std::nullopt;
  return elements_(name, index);
}
bool WorkloadConstraintEnv::is_tensor(std::string_view name) const {
  return def_.tensor(name) != nullptr;
}

std::optional<Scalar> WorkloadConstraintEnv::scalar(std::string_view name) const {
  for (const auto& [n, v] : scalars_) {
    if (n == name) return v;
  }
  return std::nullopt;
}

void WorkloadConstraintEnv::set_scalars(const Workload& w) {
  scalars_.clear();
  for (const auto& in : w.inputs) {
    if (in.kind == InputKind::kScalar) scalars_.emplace_back(in.name, in.value);
  }
}

}  // namespace fib
