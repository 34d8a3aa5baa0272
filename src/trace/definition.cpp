#include "fib/trace/definition.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <regex>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fib/base/json.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/python_signature.h"
#include "fib/trace/suggest.h"

namespace fib {

namespace {

constexpr std::string_view kDefFields[] = {"name",   "description", "op_type",
                                           "tags",   "axes",        "constraints",
                                           "inputs", "outputs",     "reference"};
enum DefField {
  kName,
  kDescription,
  kOpType,
  kTags,
  kAxes,
  kConstraints,
  kInputs,
  kOutputs,
  kReference
};

constexpr std::string_view kAxisFields[] = {"type", "value", "description"};
constexpr std::string_view kSpecFields[] = {"shape", "dtype", "description", "optional"};

std::optional<Axis> read_axis(const std::string& name, const Json& j, const JsonPath& path,
                              const ReadContext& ctx) {
  const Json* f[3];
  Axis a;
  a.name = name;
  if (!read_object(j, path, ctx, kAxisFields, f, &a.key_order)) return std::nullopt;
  bool ok = require_field(f[0], "type", path, ctx);
  if (f[0]) {
    if (auto t = read_string(*f[0], path.key("type"), ctx)) {
      if (*t == "const") {
        a.kind = AxisKind::kConst;
      } else if (*t == "var") {
        a.kind = AxisKind::kVar;
      } else {
        static constexpr std::string_view kKinds[] = {"const", "var"};
        ctx.error(path.key("type"), fmt::format("unknown axis type '{}'", *t), suggest(*t, kKinds));
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (f[1]) {
    if (auto v = read_int(*f[1], path.key("value"), ctx)) {
      if (*v < 0) {
        ctx.error(path.key("value"), fmt::format("axis value must be >= 0, found {}", *v));
        ok = false;
      }
      a.value = *v;
    } else {
      ok = false;
    }
  }
  if (ok && a.kind == AxisKind::kConst && !a.value) {
    ctx.error(path, fmt::format("const axis '{}' has no value", name),
              "add \"value\": N, or make it \"var\"");
    ok = false;
  }
  if (ok && a.kind == AxisKind::kVar && a.value) {
    ctx.error(path.key("value"), fmt::format("var axis '{}' must not have a value", name),
              "make it \"const\" or drop \"value\"");
    ok = false;
  }
  if (f[2] && !f[2]->is_null()) {
    if (auto d = read_string(*f[2], path.key("description"), ctx))
      a.description = *d;
    else
      ok = false;
  }
  if (!ok) return std::nullopt;
  return a;
}

std::optional<TensorSpec> read_spec(const std::string& name, const Json& j, const JsonPath& path,
                                    const ReadContext& ctx,
                                    const std::vector<std::string>& axis_names) {
  const Json* f[4];
  TensorSpec s;
  s.name = name;
  if (!read_object(j, path, ctx, kSpecFields, f, &s.key_order)) return std::nullopt;
  bool ok = require_field(f[0], "shape", path, ctx);
  ok = require_field(f[1], "dtype", path, ctx) && ok;
  if (f[0] && !f[0]->is_null()) {
    if (auto shape = read_string_list(*f[0], path.key("shape"), ctx)) {
      for (std::size_t i = 0; i < shape->size(); ++i) {
        const std::string& ax = (*shape)[i];
        bool defined = false;
        for (const auto& n : axis_names) defined = defined || n == ax;
        if (!defined) {
          ctx.error(path.key("shape").index(i), fmt::format("axis '{}' is not defined in axes", ax),
                    suggest(ax, axis_names));
          ok = false;
        }
      }
      s.shape = std::move(*shape);
    } else {
      ok = false;
    }
  }
  if (f[1]) {
    if (auto d = read_string(*f[1], path.key("dtype"), ctx)) {
      if (auto t = parse_dtype(*d)) {
        s.dtype = *t;
      } else {
        const auto names = dtype_names();
        ctx.error(path.key("dtype"), fmt::format("unknown dtype '{}'", *d), suggest(*d, names));
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (f[2] && !f[2]->is_null()) {
    if (auto d = read_string(*f[2], path.key("description"), ctx))
      s.description = *d;
    else
      ok = false;
  }
  if (f[3]) {
    if (auto b = read_bool(*f[3], path.key("optional"), ctx))
      s.optional = *b;
    else
      ok = false;
  }
  if (!ok) return std::nullopt;
  return s;
}

bool read_specs(const Json* j, std::string_view field, const JsonPath& root, const ReadContext& ctx,
                const std::vector<std::string>& axis_names, std::vector<TensorSpec>& out) {
  const JsonPath path = root.key(field);
  if (!j->is_object()) {
    ctx.error(path, fmt::format("expected an object of name -> {{shape, dtype}}, found {}",
                                json_kind(*j)));
    return false;
  }
  bool ok = true;
  for (auto it = j->begin(); it != j->end(); ++it) {
    if (auto s = read_spec(it.key(), it.value(), path.key(it.key()), ctx, axis_names)) {
      out.push_back(std::move(*s));
    } else {
      ok = false;
    }
  }
  return ok;
}

void check_reference_impl(const Definition& d, const JsonPath& path, const ReadContext& ctx,
                          bool& ok) {
  std::string err;
  auto sig = find_top_level_function(d.reference, "run", &err);
  if (!sig) {
    if (!err.empty()) {
      ctx.error(path, "cannot read the parameters of run(): " + err);
    } else {
      ctx.error(path, "reference has no top-level function 'run'",
                "define `def run(" + fmt::format("{}", fmt::join(d.input_names(), ", ")) +
                    "):` at column 0");
    }
    ok = false;
    return;
  }
  const auto inputs = d.input_names();
  std::vector<std::string> missing, extra;
  for (const auto& in : inputs) {
    bool found = false;
    for (const auto& p : sig->params) found = found || p == in;
    if (!found && !sig->has_var_keyword) missing.push_back(in);
  }
  for (const auto& p : sig->params) {
    bool found = false;
    for (const auto& in : inputs) found = found || p == in;
    if (!found) extra.push_back(p);
  }
  for (const auto& p : extra) {
    ctx.error(path,
              fmt::format("run() parameter '{}' (line {}) is not an input of the definition", p,
                          sig->line),
              suggest(p, inputs));
    ok = false;
  }
  for (const auto& in : missing) {
    ctx.error(path, fmt::format("input '{}' is not a parameter of run() (line {})", in, sig->line),
              suggest(in, sig->params));
    ok = false;
  }
  if (missing.empty() && extra.empty() && sig->params != inputs &&
      sig->params.size() == inputs.size()) {
    std::size_t first = 0;
    while (first < inputs.size() && sig->params[first] == inputs[first]) ++first;
    ctx.error(
        path,
        fmt::format("run() takes its parameters in a different order than `inputs` lists them: "
                    "parameter {} is '{}' but input {} is '{}' (run({}) vs inputs [{}]); a caller "
                    "that passes inputs positionally, as upstream FlashInfer-Bench does, binds "
                    "the wrong tensors",
                    first + 1, sig->params[first], first + 1, inputs[first],
                    fmt::join(sig->params, ", "), fmt::join(inputs, ", ")),
        "reorder `inputs` to match run(), or run()'s parameters to match `inputs`");
    ok = false;
  }
}

}  // namespace

std::optional<std::int64_t> axis_value(const AxisValues& values, std::string_view name) {
  for (const auto& [n, v] : values) {
    if (n == name) return v;
  }
  return std::nullopt;
}

const Axis* Definition::axis(std::string_view n) const {
  for (const auto& a : axes) {
    if (a.name == n) return &a;
  }
  return nullptr;
}
const TensorSpec* Definition::input(std::string_view n) const {
  for (const auto& s : inputs) {
    if (s.name == n) return &s;
  }
  return nullptr;
}
const TensorSpec* Definition::output(std::string_view n) const {
  for (const auto& s : outputs) {
    if (s.name == n) return &s;
  }
  return nullptr;
}
const TensorSpec* Definition::tensor(std::string_view n) const {
  const TensorSpec* s = input(n);
  return s ? s : output(n);
}
std::vector<std::string> Definition::var_axes() const {
  std::vector<std::string> out;
  for (const auto& a : axes) {
    if (a.kind == AxisKind::kVar) out.push_back(a.name);
  }
  return out;
}
std::vector<std::string> Definition::input_names() const {
  std::vector<std::string> out;
  out.reserve(inputs.size());
  for (const auto& s : inputs) out.push_back(s.name);
  return out;
}
bool Definition::has_tag(std::string_view tag) const {
  for (const auto& t : tags) {
    if (t == tag) return true;
  }
  return false;
}
std::vector<std::string> Definition::tag_values(std::string_view prefix) const {
  std::vector<std::string> out;
  for (const auto& t : tags) {
    if (t.size() > prefix.size() && t.compare(0, prefix.size(), prefix) == 0) {
      out.push_back(t.substr(prefix.size()));
    }
  }
  return out;
}

std::optional<AxisValues> Definition::bind_axes(const AxisValues& var_values) const {
  AxisValues out;
  out.reserve(axes.size());
  for (const auto& a : axes) {
    if (a.kind == AxisKind::kConst) {
      out.emplace_back(a.name, a.value.value_or(0));
    } else if (auto v = axis_value(var_values, a.name)) {
      out.emplace_back(a.name, *v);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<std::vector<std::int64_t>> Definition::concrete_shape(const TensorSpec& spec,
                                                                    const AxisValues& bound) const {
  std::vector<std::int64_t> out;
  if (!spec.shape) return out;
  out.reserve(spec.shape->size());
  for (const auto& ax : *spec.shape) {
    auto v = axis_value(bound, ax);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::optional<Definition> definition_from_json(const Json& j, const ReadContext& ctx) {
  const std::size_t errors_before = ctx.errors;
  const JsonPath root;
  const Json* f[std::size(kDefFields)];
  Definition d;
  if (!read_object(j, root, ctx, kDefFields, f, &d.key_order)) return std::nullopt;
  bool ok = true;
  for (int req : {kName, kOpType, kAxes, kInputs, kOutputs, kReference}) {
    ok = require_field(f[req], kDefFields[req], root, ctx) && ok;
  }
  if (f[kName]) {
    if (auto s = read_string(*f[kName], root.key("name"), ctx, false))
      d.name = *s;
    else
      ok = false;
  }
  if (f[kOpType]) {
    if (auto s = read_string(*f[kOpType], root.key("op_type"), ctx, false))
      d.op_type = *s;
    else
      ok = false;
  }
  if (f[kDescription] && !f[kDescription]->is_null()) {
    if (auto s = read_string(*f[kDescription], root.key("description"), ctx))
      d.description = *s;
    else
      ok = false;
  }
  if (f[kTags]) {
    if (auto t = read_string_list(*f[kTags], root.key("tags"), ctx))
      d.tags = std::move(*t);
    else
      ok = false;
  }
  std::vector<std::string> axis_names;
  if (f[kAxes]) {
    const JsonPath ap = root.key("axes");
    if (!f[kAxes]->is_object()) {
      ctx.error(ap, fmt::format("expected an object of axis name -> {{type, value}}, found {}",
                                json_kind(*f[kAxes])));
      ok = false;
    } else {
      for (auto it = f[kAxes]->begin(); it != f[kAxes]->end(); ++it) {
        axis_names.push_back(it.key());
        if (auto a = read_axis(it.key(), it.value(), ap.key(it.key()), ctx)) {
          d.axes.push_back(std::move(*a));
        } else {
          ok = false;
        }
      }
    }
  }
  if (f[kInputs]) ok = read_specs(f[kInputs], "inputs", root, ctx, axis_names, d.inputs) && ok;
  if (f[kOutputs]) {
    ok = read_specs(f[kOutputs], "outputs", root, ctx, axis_names, d.outputs) && ok;
    if (f[kOutputs]->is_object() && f[kOutputs]->empty()) {
      ctx.error(root.key("outputs"), "a definition needs at least one output");
      ok = false;
    }
    for (const auto& o : d.outputs) {
      if (o.is_optional()) {
        ctx.error(root.key("outputs").key(o.name).key("optional"), "outputs cannot be optional");
        ok = false;
      }
    }
  }
  for (const auto& o : d.outputs) {
    if (d.input(o.name) != nullptr) {
      ctx.error(root.key("outputs").key(o.name),
                fmt::format("'{}' is both an input and an output", o.name),
                "give the output its own name (e.g. '" + o.name + "_out')");
      ok = false;
    }
  }
  if (f[kReference]) {
    if (auto s = read_string(*f[kReference], root.key("reference"), ctx, false)) {
      d.reference = *s;
    } else {
      ok = false;
    }
  }
  if (f[kConstraints]) {
    const JsonPath cp = root.key("constraints");
    if (auto list = read_string_list(*f[kConstraints], cp, ctx)) {
      d.constraints = std::move(*list);
      std::vector<std::string> known = axis_names;
      for (const auto& s : d.inputs) known.push_back(s.name);
      for (const auto& s : d.outputs) known.push_back(s.name);
      for (std::size_t i = 0; i < d.constraints.size(); ++i) {
        std::string err;
        auto c = Constraint::parse(d.constraints[i], &err);
        if (!c) {
          ctx.error(cp.index(i),
                    fmt::format("cannot parse constraint '{}': {}", d.constraints[i], err));
          ok = false;
          continue;
        }
        for (const auto& n : c->names()) {
          bool found = false;
          for (const auto& k : known) found = found || k == n;
          if (!found) {
            ctx.error(
                cp.index(i),
                fmt::format("constraint '{}' names '{}', which is neither an axis nor an input "
                            "or output",
                            d.constraints[i], n),
                suggest(n, known));
            ok = false;
          }
        }
        d.parsed_constraints.push_back(std::move(*c));
      }
    } else {
      ok = false;
    }
  }
  if (!ok || ctx.errors != errors_before) return std::nullopt;
  return d;
}

Json to_json(const Definition& d) {
  Json v[std::size(kDefFields)];
  v[kName] = d.name;
  if (d.description) v[kDescription] = *d.description;
  v[kOpType] = d.op_type;
  if (!d.tags.empty() || d.key_order.contains(kTags) || d.key_order.size() == 0) v[kTags] = d.tags;
  Json axes = Json::object();
  for (const auto& a : d.axes) {
    Json av[3];
    av[0] = a.kind == AxisKind::kConst ? "const" : "var";
    if (a.value) av[1] = *a.value;
    if (a.description) av[2] = *a.description;
    static constexpr bool kAlways[] = {true, false, false};
    axes[a.name] = write_object(kAxisFields, av, a.key_order, kAlways);
  }
  v[kAxes] = std::move(axes);
  if (!d.constraints.empty() || d.key_order.contains(kConstraints)) v[kConstraints] = d.constraints;
  auto specs = [](const std::vector<TensorSpec>& list) {
    Json out = Json::object();
    for (const auto& s : list) {
      Json sv[4];
      if (s.shape) sv[0] = *s.shape;
      sv[1] = dtype_name(s.dtype);
      if (s.description) sv[2] = *s.description;
      if (s.optional) sv[3] = *s.optional;
      static constexpr bool kAlways[] = {true, true, false, false};
      out[s.name] = write_object(kSpecFields, sv, s.key_order, kAlways);
    }
    return out;
  };
  v[kInputs] = specs(d.inputs);
  v[kOutputs] = specs(d.outputs);
  v[kReference] = d.reference;
  static constexpr bool kAlways[] = {true, false, true, false, true, false, true, true, true};
  return write_object(kDefFields, v, d.key_order, kAlways);
}

std::optional<DescribedScale> described_inverse_sqrt(const TensorSpec& spec) {
  if (!spec.description) return std::nullopt;
  static const std::regex kPattern(R"(1\s*/\s*sqrt\(\s*([0-9]+(?:\.[0-9]+)?)\s*\))");
  std::optional<DescribedScale> last;
  for (auto it = std::sregex_iterator(spec.description->begin(), spec.description->end(), kPattern);
       it != std::sregex_iterator(); ++it) {
    last = DescribedScale{1.0 / std::sqrt(std::stod((*it)[1].str())), it->str()};
  }
  return last;
}

std::vector<ReferenceConstant> reference_constant_assignments(const Definition& def) {
  // A reference's constants are read on every call of the native references that need them
  // (the CUDA MoE reads five), and std::regex over a reference of a few hundred lines takes
  // about 0.1 ms: the parse is kept per reference text.
  static std::mutex mutex;
  static std::unordered_map<std::string, std::vector<ReferenceConstant>> parsed;
  {
    const std::lock_guard lock(mutex);
    if (auto it = parsed.find(def.reference); it != parsed.end()) return it->second;
  }
  static const std::regex kAssign(
      R"(^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([-+]?[0-9][0-9_]*\.?[0-9]*(?:[eE][-+]?[0-9]+)?)\s*(?:#.*)?$)");
  std::vector<ReferenceConstant> out;
  std::size_t pos = 0;
  while (pos < def.reference.size()) {
    std::size_t nl = def.reference.find('\n', pos);
    if (nl == std::string::npos) nl = def.reference.size();
    const std::string line = def.reference.substr(pos, nl - pos);
    pos = nl + 1;
    std::smatch m;
    if (!std::regex_match(line, m, kAssign)) continue;
    std::string digits = m[2].str();
    digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
    out.push_back({m[1].str(), std::stod(digits), m[2].str()});
  }
  const std::lock_guard lock(mutex);
  if (parsed.size() >= 4096) parsed.clear();  // bounded: datasets hold a few hundred references
  parsed.emplace(def.reference, out);
  return out;
}

bool check_definition_reference(const Definition& d, const ReadContext& ctx) {
  bool ok = true;
  const JsonPath root;
  check_reference_impl(d, root.key("reference"), ctx, ok);
  return ok;
}

Definition load_definition(const std::string& path) {
  Diagnostics diag;
  auto j = read_json_file(path, diag);
  if (j) {
    ReadContext ctx{path, &diag};
    if (auto d = definition_from_json(*j, ctx)) {
      if (!diag.has_errors()) return std::move(*d);
    }
  }
  throw Error(std::move(diag));
}

}  // namespace fib
