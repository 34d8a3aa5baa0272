// Eval config: the built-in layers, the YAML reader and layer resolution.
#include "fib/bench/eval/eval_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "fib/bench/eval/op_family.h"
#include "fib/trace/dtype.h"
#include "fib/trace/suggest.h"

namespace fib::bench {

namespace {

constexpr std::array<std::string_view, 10> kSettingFields = {"warmup_runs",
                                                             "iterations",
                                                             "num_trials",
                                                             "rtol",
                                                             "atol",
                                                             "required_matched_ratio",
                                                             "max_nmse",
                                                             "extra",
                                                             "sampling_validation_trials",
                                                             "sampling_tvd_threshold"};
constexpr std::array<std::string_view, 13> kTopFields = {"warmup_runs",
                                                         "iterations",
                                                         "num_trials",
                                                         "rtol",
                                                         "atol",
                                                         "required_matched_ratio",
                                                         "max_nmse",
                                                         "extra",
                                                         "sampling_validation_trials",
                                                         "sampling_tvd_threshold",
                                                         "dtype_config",
                                                         "op_type_config",
                                                         "definition_config"};
constexpr std::array<std::string_view, 4> kDtypeFields = {"rtol", "atol", "required_matched_ratio",
                                                          "max_nmse"};

enum class ValueKind : std::uint8_t { kInt, kNumber };

// Range of a field or an extra key: [lo, hi] with optionally open ends.
struct Range {
  ValueKind kind = ValueKind::kNumber;
  double lo = 0;
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;
};

struct ExtraKey {
  std::string_view name;
  Range range;
};

constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr std::array<ExtraKey, 7> kExtraKeyTable = {{
    {"sampling_validation_trials", {ValueKind::kInt, 1, kInf, false, false}},
    {"sampling_draws_per_row", {ValueKind::kInt, 1, kInf, false, false}},
    {"sampling_tvd_threshold", {ValueKind::kNumber, 0, 1, false, false}},
    {"sampling_chi2_alpha", {ValueKind::kNumber, 0, 1, true, true}},
    {"sampling_top_p_epsilon", {ValueKind::kNumber, 0, kInf, false, false}},
    {"topk_score_rtol", {ValueKind::kNumber, 0, kInf, false, false}},
    {"topk_score_atol", {ValueKind::kNumber, 0, kInf, false, false}},
}};

constexpr std::array<std::string_view, 7> kExtraKeyNames = {"sampling_validation_trials",
                                                            "sampling_draws_per_row",
                                                            "sampling_tvd_threshold",
                                                            "sampling_chi2_alpha",
                                                            "sampling_top_p_epsilon",
                                                            "topk_score_rtol",
                                                            "topk_score_atol"};

Range field_range(std::string_view field) {
  if (field == "warmup_runs") return {ValueKind::kInt, 0, kInf, false, false};
  if (field == "iterations" || field == "num_trials")
    return {ValueKind::kInt, 1, kInf, false, false};
  if (field == "required_matched_ratio") return {ValueKind::kNumber, 0, 1, true, false};
  return {ValueKind::kNumber, 0, kInf, false, false};  // rtol, atol, max_nmse
}

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  if (std::isnan(v)) return ".nan";
  return fmt::format("{:g}", v);
}

// "must be >= 0", "must be in (0, 1]".
std::string range_text(const Range& r) {
  if (std::isinf(r.hi))
    return fmt::format("must be {} {}", r.lo_open ? ">" : ">=", format_number(r.lo));
  return fmt::format("must be in {}{}, {}{}", r.lo_open ? "(" : "[", format_number(r.lo),
                     format_number(r.hi), r.hi_open ? ")" : "]");
}

bool in_range(double v, const Range& r) {
  if (std::isnan(v)) return false;
  if (r.lo_open ? !(v > r.lo) : !(v >= r.lo)) return false;
  if (r.hi_open ? !(v < r.hi) : !(v <= r.hi)) return false;
  return true;
}

// Range problem of `v` for `name`, or empty.
std::string range_error(std::string_view name, double v, const Range& r) {
  if (in_range(v, r)) return {};
  const bool tolerance = name == "rtol" || name == "atol" || name == "max_nmse";
  if (tolerance && v < 0)
    return fmt::format("negative tolerance: {} {}, found {}", name, range_text(r),
                       format_number(v));
  return fmt::format("{} {}, found {}", name, range_text(r), format_number(v));
}

const ExtraKey* find_extra_key(std::string_view name) {
  for (const auto& k : kExtraKeyTable)
    if (k.name == name) return &k;
  return nullptr;
}

// ---- YAML scalars ------------------------------------------------------------------------

// A plain YAML scalar read by the YAML 1.2 core schema: null, bool, int, float, else string.
Json scalar_to_json(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return Json(s);  // quoted: always a string
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Json(nullptr);
  if (s == "true" || s == "True" || s == "TRUE") return Json(true);
  if (s == "false" || s == "False" || s == "FALSE") return Json(false);
  {
    std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    bool digits = i < s.size();
    for (std::size_t j = i; j < s.size(); ++j)
      if (s[j] < '0' || s[j] > '9') digits = false;
    if (digits) {
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (errno == 0 && end == s.c_str() + s.size()) return Json(static_cast<std::int64_t>(v));
    }
  }
  for (const char* inf : {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"})
    if (s == inf) return Json(kInf);
  for (const char* inf : {"-.inf", "-.Inf", "-.INF"})
    if (s == inf) return Json(-kInf);
  if (s == ".nan" || s == ".NaN" || s == ".NAN")
    return Json(std::numeric_limits<double>::quiet_NaN());
  const bool numeric_start =
      (s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '+' || s[0] == '.';
  if (numeric_start) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() + s.size() && std::isfinite(v)) return Json(v);
  }
  return Json(s);
}

std::string node_kind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar: {
      const Json j = scalar_to_json(n);
      return fmt::format("{} {}", json_kind(j), n.Tag() == "!" ? json_preview(j) : n.Scalar());
    }
    default:
      return "nothing";
  }
}

// ---- The reader ----------------------------------------------------------------------------

class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  void error(const YAML::Node& at, const JsonPath& path, std::string message,
             std::string hint = {}) {
    const YAML::Mark m = at.Mark();
    const std::string file = m.is_null() ? origin_ : fmt::format("{}:{}", origin_, m.line + 1);
    diag_.error(file, path.str(), std::move(message), std::move(hint));
  }

  const Diagnostics& diagnostics() const { return diag_; }
  const std::string& origin() const { return origin_; }

  // Iterates a mapping, reporting duplicate keys; calls f(key, key_node, value_node).
  template <typename F>
  bool each_entry(const YAML::Node& map, const JsonPath& path, F&& f) {
    if (map.IsNull()) return true;
    if (!map.IsMap()) {
      error(map, path, fmt::format("expected a mapping, found {}", node_kind(map)));
      return false;
    }
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar()) {
        error(it->first, path, "a key must be a plain name");
        continue;
      }
      const std::string key = it->first.Scalar();
      if (!seen.insert(key).second) {
        error(it->first, path.key(key), fmt::format("duplicate key '{}'", key));
        continue;
      }
      f(key, it->first, it->second);
    }
    return true;
  }

  std::optional<double> read_value(const YAML::Node& v, const JsonPath& path, std::string_view name,
                                   const Range& range) {
    if (!v.IsScalar()) {
      error(v, path,
            fmt::format("expected {}, found {}",
                        range.kind == ValueKind::kInt ? "an integer" : "a number", node_kind(v)));
      return std::nullopt;
    }
    const Json j = scalar_to_json(v);
    const bool ok = range.kind == ValueKind::kInt ? j.is_number_integer() : j.is_number();
    if (!ok) {
      error(v, path,
            fmt::format("expected {}, found {}",
                        range.kind == ValueKind::kInt ? "an integer" : "a number", node_kind(v)));
      return std::nullopt;
    }
    const double d = j.get<double>();
    if (range.kind == ValueKind::kInt &&
        (d > std::numeric_limits<int>::max() || d < std::numeric_limits<int>::min())) {
      error(v, path, fmt::format("{} is too large", name));
      return std::nullopt;
    }
    if (std::string e = range_error(name, d, range); !e.empty()) {
      error(v, path, std::move(e));
      return std::nullopt;
    }
    return d;
  }

  void read_extra_value(EvalSettings& s, const std::string& key, const YAML::Node& v,
                        const JsonPath& path) {
    const ExtraKey* k = find_extra_key(key);
    if (k == nullptr) {
      error(v, path, fmt::format("unknown extra key '{}'", key), suggest(key, kExtraKeyNames));
      return;
    }
    if (v.IsNull()) return;
    if (auto d = read_value(v, path, key, k->range)) {
      s.extra[key] =
          k->range.kind == ValueKind::kInt ? Json(static_cast<std::int64_t>(*d)) : Json(*d);
    }
  }

  // One layer. `fields` is the list of keys allowed here (the settings, and at the top level
  // the three config maps, which `rest` handles).
  template <typename Rest>
  void read_settings(const YAML::Node& map, const JsonPath& path,
                     std::span<const std::string_view> fields, EvalSettings& s, Rest&& rest,
                     bool dtype_layer = false) {
    each_entry(
        map, path, [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& v) {
          const JsonPath p = path.key(key);
          bool known = false;
          for (auto f : fields) known = known || f == key;
          if (!known) {
            bool setting = false;
            for (auto f : kSettingFields) setting = setting || f == key;
            if (dtype_layer && setting) {
              error(key_node, p,
                    fmt::format("'{}' cannot be set per dtype (dtype_config holds rtol, atol, "
                                "required_matched_ratio and max_nmse)",
                                key));
            } else {
              error(key_node, p, fmt::format("unknown key '{}'", key), suggest(key, fields));
            }
            return;
          }
          if (rest(key, v, p)) return;
          if (v.IsNull()) return;  // upstream's None: unset
          if (key == "extra") {
            each_entry(v, p, [&](const std::string& k, const YAML::Node&, const YAML::Node& ev) {
              read_extra_value(s, k, ev, p.key(k));
            });
            return;
          }
          if (key == "sampling_validation_trials" || key == "sampling_tvd_threshold") {
            read_extra_value(s, key, v, p);  // upstream's deprecated top-level spelling
            return;
          }
          const Range r = field_range(key);
          const std::optional<double> d = read_value(v, p, key, r);
          if (!d) return;
          if (key == "warmup_runs") s.warmup_runs = static_cast<int>(*d);
          if (key == "iterations") s.iterations = static_cast<int>(*d);
          if (key == "num_trials") s.num_trials = static_cast<int>(*d);
          if (key == "rtol") s.rtol = *d;
          if (key == "atol") s.atol = *d;
          if (key == "required_matched_ratio") s.required_matched_ratio = *d;
          if (key == "max_nmse") s.max_nmse = *d;
        });
  }

  void read_layer_map(const YAML::Node& map, const JsonPath& path,
                      std::map<std::string, EvalSettings, std::less<>>& out, bool dtypes) {
    each_entry(
        map, path, [&](const std::string& key, const YAML::Node& key_node, const YAML::Node& v) {
          const JsonPath p = path.key(key);
          if (dtypes && !parse_dtype(key)) {
            const auto names = dtype_names();
            error(key_node, p, fmt::format("unknown dtype '{}'", key),
                  suggest(key, std::span<const std::string_view>(names.data(), names.size())));
            return;
          }
          EvalSettings& s = out[key];
          if (dtypes) {
            read_settings(v, p, kDtypeFields, s, no_rest, true);
          } else {
            read_settings(v, p, kSettingFields, s, no_rest);
          }
        });
  }

  static bool no_rest(const std::string&, const YAML::Node&, const JsonPath&) { return false; }

 private:
  std::string origin_;
  Diagnostics diag_;
};

// ---- Resolution ----------------------------------------------------------------------------

struct Layer {
  const EvalSettings* settings;
  std::string label;
  bool tolerances_apply;  // false: rtol/atol of this layer do not reach an integer output
};

std::string user_label(const EvalConfigFile& f, std::string_view what) {
  return fmt::format("{} in {}", what,
                     f.origin.empty() ? std::string("the eval config") : f.origin);
}

}  // namespace

bool EvalSettings::empty() const {
  return !warmup_runs && !iterations && !num_trials && !rtol && !atol && !required_matched_ratio &&
         !max_nmse && (extra.is_null() || extra.empty());
}

std::span<const std::string_view> eval_extra_keys() { return kExtraKeyNames; }

EvalConfigFile builtin_eval_config() {
  EvalConfigFile c;
  c.origin = "built-in";
  c.top.warmup_runs = 10;
  c.top.iterations = 50;
  c.top.num_trials = 3;
  c.top.rtol = 1e-2;
  c.top.atol = 1e-2;
  c.top.max_nmse = 1e-2;
  for (DType t : kAllDTypes) {
    if (dtype_is_integer(t) || t == DType::kBool) {
      EvalSettings& s = c.dtype[std::string(dtype_name(t))];
      s.rtol = 0;
      s.atol = 0;
    }
  }
  c.dtype["float8_e4m3fn"].rtol = 0.125;
  c.dtype["float8_e5m2"].rtol = 0.25;
  c.dtype["float4_e2m1"].rtol = 0.5;
  c.dtype["float4_e2m1"].atol = 0.5;

  for (const OpFamily* f : op_families()) {
    EvalSettings layer = f->builtin_eval();
    if (!layer.empty()) c.op_type.emplace(std::string(f->op_type), std::move(layer));
  }
  return c;
}

EvalConfigFile parse_eval_config(std::string_view yaml_text, const std::string& origin) {
  EvalConfigFile cfg;
  cfg.origin = origin;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    const std::string file =
        e.mark.is_null() ? origin : fmt::format("{}:{}", origin, e.mark.line + 1);
    throw Error(file, fmt::format("invalid YAML: {}", e.msg));
  }
  Reader r(origin);
  const JsonPath root_path;
  if (!root.IsNull()) {
    r.read_settings(root, root_path, kTopFields, cfg.top,
                    [&](const std::string& key, const YAML::Node& v, const JsonPath& p) {
                      if (key == "dtype_config") {
                        r.read_layer_map(v, p, cfg.dtype, true);
                      } else if (key == "op_type_config") {
                        r.read_layer_map(v, p, cfg.op_type, false);
                      } else if (key == "definition_config") {
                        r.read_layer_map(v, p, cfg.definition, false);
                      } else {
                        return false;
                      }
                      return true;
                    });
  }
  if (r.diagnostics().has_errors()) throw Error(r.diagnostics());
  return cfg;
}

EvalConfigFile load_eval_config(const std::filesystem::path& yaml) {
  std::ifstream in(yaml, std::ios::binary);
  if (!in) throw Error(yaml.string(), "cannot read the eval config");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_eval_config(ss.str(), yaml.string());
}

void check_eval_settings(const EvalSettings& s, const std::string& origin) {
  Diagnostics d;
  auto check = [&](std::string_view name, std::optional<double> v) {
    if (!v) return;
    if (std::string e = range_error(name, *v, field_range(name)); !e.empty())
      d.error(origin, std::string(name), std::move(e));
  };
  check("warmup_runs", s.warmup_runs ? std::optional<double>(*s.warmup_runs) : std::nullopt);
  check("iterations", s.iterations ? std::optional<double>(*s.iterations) : std::nullopt);
  check("num_trials", s.num_trials ? std::optional<double>(*s.num_trials) : std::nullopt);
  check("rtol", s.rtol);
  check("atol", s.atol);
  check("required_matched_ratio", s.required_matched_ratio);
  check("max_nmse", s.max_nmse);
  if (!s.extra.is_null() && !s.extra.is_object()) {
    d.error(origin, "extra", "expected an object");
  } else if (s.extra.is_object()) {
    for (auto it = s.extra.begin(); it != s.extra.end(); ++it) {
      const std::string path = "extra." + it.key();
      const ExtraKey* k = find_extra_key(it.key());
      if (k == nullptr) {
        d.error(origin, path, fmt::format("unknown extra key '{}'", it.key()),
                suggest(it.key(), kExtraKeyNames));
        continue;
      }
      const Json& v = it.value();
      const bool ok = k->range.kind == ValueKind::kInt ? v.is_number_integer() : v.is_number();
      if (!ok) {
        d.error(origin, path,
                fmt::format("expected {}, found {}",
                            k->range.kind == ValueKind::kInt ? "an integer" : "a number",
                            json_kind(v)));
        continue;
      }
      if (std::string e = range_error(it.key(), v.get<double>(), k->range); !e.empty())
        d.error(origin, path, std::move(e));
    }
  }
  if (d.has_errors()) throw Error(d);
}

Diagnostics check_eval_config_names(const EvalConfigFile& cfg,
                                    std::span<const std::string> op_types,
                                    std::span<const std::string> definitions) {
  Diagnostics d;
  const std::set<std::string, std::less<>> ops(op_types.begin(), op_types.end());
  const std::set<std::string, std::less<>> defs(definitions.begin(), definitions.end());
  for (const auto& [name, s] : cfg.op_type) {
    if (!ops.contains(name))
      d.warning(cfg.origin, fmt::format("$.op_type_config.{}", name),
                fmt::format("no definition has op_type '{}'; this layer applies to nothing", name),
                suggest(name, op_types));
  }
  for (const auto& [name, s] : cfg.definition) {
    if (!defs.contains(name))
      d.warning(cfg.origin, fmt::format("$.definition_config.{}", name),
                fmt::format("no definition is named '{}'; this layer applies to nothing", name),
                suggest(name, definitions));
  }
  return d;
}

double ResolvedEval::extra_number(std::string_view key, double fallback) const {
  if (!extra.is_object()) return fallback;
  const auto it = extra.find(key);
  if (it == extra.end() || !it->is_number()) return fallback;
  return it->get<double>();
}

std::int64_t ResolvedEval::extra_int(std::string_view key, std::int64_t fallback) const {
  if (!extra.is_object()) return fallback;
  const auto it = extra.find(key);
  if (it == extra.end() || !it->is_number()) return fallback;
  return it->get<std::int64_t>();
}

ResolvedEval resolve_eval(const EvalConfigFile& builtin, const EvalConfigFile* user,
                          const EvalSettings& cli, const Definition& def,
                          std::string_view output_name) {
  const TensorSpec* out = nullptr;
  if (!output_name.empty()) {
    out = def.output(output_name);
    if (out == nullptr) {
      std::vector<std::string> names;
      for (const auto& o : def.outputs) names.push_back(o.name);
      throw Error(def.name, fmt::format("'{}' is not an output of {}", output_name, def.name),
                  suggest(output_name, names));
    }
  }
  const bool exact_kind =
      out != nullptr && (dtype_is_integer(out->dtype) || out->dtype == DType::kBool);

  std::vector<Layer> layers;
  auto add = [&](const EvalSettings* s, std::string label, bool tolerances) {
    if (s != nullptr) layers.push_back({s, std::move(label), tolerances});
  };
  auto find = [](const std::map<std::string, EvalSettings, std::less<>>& m, std::string_view k) {
    const auto it = m.find(k);
    return it == m.end() ? nullptr : &it->second;
  };
  add(&builtin.top, "default", true);
  if (out != nullptr) {
    const std::string dt(dtype_name(out->dtype));
    add(find(builtin.dtype, dt), fmt::format("built-in dtype_config.{}", dt), true);
    if (user)
      add(find(user->dtype, dt), user_label(*user, fmt::format("dtype_config.{}", dt)), true);
  }
  add(find(builtin.op_type, def.op_type), fmt::format("built-in op_type_config.{}", def.op_type),
      !exact_kind);
  if (user)
    add(find(user->op_type, def.op_type),
        user_label(*user, fmt::format("op_type_config.{}", def.op_type)), !exact_kind);
  add(find(builtin.definition, def.name), fmt::format("built-in definition_config.{}", def.name),
      !exact_kind);
  if (user)
    add(find(user->definition, def.name),
        user_label(*user, fmt::format("definition_config.{}", def.name)), !exact_kind);
  if (user) add(&user->top, user_label(*user, "the top level"), !exact_kind);
  add(&cli, "command line", !exact_kind);

  ResolvedEval r;
  std::map<std::string, std::string, std::less<>> from;  // field -> label
  std::vector<std::string> ignored;
  auto set_int = [&](const std::optional<int>& v, int& dst, std::string_view name, const Layer& l) {
    if (!v) return;
    dst = *v;
    from[std::string(name)] = l.label;
  };
  auto set_double = [&](const std::optional<double>& v, double& dst, std::string_view name,
                        const Layer& l, bool tolerance) {
    if (!v) return;
    if (tolerance && !l.tolerances_apply) {
      ignored.push_back(fmt::format("{} from {}", name, l.label));
      return;
    }
    dst = *v;
    from[std::string(name)] = l.label;
  };
  for (const Layer& l : layers) {
    const EvalSettings& s = *l.settings;
    set_int(s.warmup_runs, r.warmup_runs, "warmup_runs", l);
    set_int(s.iterations, r.iterations, "iterations", l);
    set_int(s.num_trials, r.num_trials, "num_trials", l);
    set_double(s.rtol, r.rtol, "rtol", l, true);
    set_double(s.atol, r.atol, "atol", l, true);
    if (s.required_matched_ratio) {
      r.required_matched_ratio = s.required_matched_ratio;
      from["required_matched_ratio"] = l.label;
    }
    set_double(s.max_nmse, r.max_nmse, "max_nmse", l, false);
    if (s.extra.is_object()) {
      for (auto it = s.extra.begin(); it != s.extra.end(); ++it) {
        r.extra[it.key()] = it.value();
        from["extra." + it.key()] = l.label;
      }
    }
  }

  std::vector<std::string> parts;
  auto describe = [&](std::string_view name, const std::string& value) {
    const auto it = from.find(name);
    parts.push_back(
        fmt::format("{}={} ({})", name, value, it == from.end() ? "unset" : it->second));
  };
  describe("warmup_runs", std::to_string(r.warmup_runs));
  describe("iterations", std::to_string(r.iterations));
  describe("num_trials", std::to_string(r.num_trials));
  describe("rtol", format_number(r.rtol));
  describe("atol", format_number(r.atol));
  if (r.required_matched_ratio)
    describe("required_matched_ratio", format_number(*r.required_matched_ratio));
  describe("max_nmse", format_number(r.max_nmse));
  for (auto it = r.extra.begin(); it != r.extra.end(); ++it)
    describe("extra." + it.key(), it.value().dump());
  r.sources = fmt::format("{}", fmt::join(parts, "; "));
  if (!ignored.empty()) {
    r.sources += fmt::format(
        "; {} output '{}' compares exactly unless dtype_config says "
        "otherwise, so these do not apply: {}",
        dtype_name(out->dtype), out->name, fmt::join(ignored, ", "));
  }
  return r;
}

std::map<std::string, ResolvedEval, std::less<>> resolve_eval_outputs(const EvalConfigFile& builtin,
                                                                      const EvalConfigFile* user,
                                                                      const EvalSettings& cli,
                                                                      const Definition& def) {
  std::map<std::string, ResolvedEval, std::less<>> out;
  for (const auto& o : def.outputs)
    out.emplace(o.name, resolve_eval(builtin, user, cli, def, o.name));
  return out;
}

Json to_json(const ResolvedEval& r) {
  Json j = Json::object();
  j["warmup_runs"] = r.warmup_runs;
  j["iterations"] = r.iterations;
  j["num_trials"] = r.num_trials;
  j["rtol"] = write_extended_number(r.rtol);
  j["atol"] = write_extended_number(r.atol);
  j["required_matched_ratio"] =
      r.required_matched_ratio ? Json(*r.required_matched_ratio) : Json(nullptr);
  j["max_nmse"] = write_extended_number(r.max_nmse);
  j["extra"] = r.extra;
  return j;
}

}  // namespace fib::bench
