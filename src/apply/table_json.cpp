// The apply table's JSON (docs/apply.md, "The table file") and its text summary.
#include <fmt/format.h>

#include <cmath>

#include "apply/artifacts.h"
#include "fib/apply/table.h"
#include "fib/base/diagnostics.h"

namespace fib::apply {

namespace {

constexpr std::string_view kFormat = "fib-apply-table";

Json optional_number(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

std::optional<double> optional_number(const Json& j) {
  return j.is_number() ? std::optional<double>(j.get<double>()) : std::nullopt;
}

Json axes_json(const AxisValues& axes) {
  Json j = Json::object();
  for (const auto& [name, value] : axes) j[name] = value;
  return j;
}

Json choice_json(const Choice& c) {
  Json j;
  j["solution"] = c.solution;
  j["language"] = c.language;
  j["binding"] = c.binding.empty() ? Json(nullptr) : Json(c.binding);
  j["entry_point"] = c.entry_point;
  j["destination_passing_style"] = c.destination_passing_style;
  j["digest"] = c.digest;
  j["solution_file"] = c.solution_file.string();
  j["build_keys"] = c.build_keys;
  if (c.artifact) {
    j["artifact"] = Json{{"kind", c.artifact->kind},
                         {"path", c.artifact->path.string()},
                         {"build_key", c.artifact->build_key}};
  } else {
    j["artifact"] = nullptr;
  }
  return j;
}

Json definition_json(const DefinitionTable& d) {
  Json j;
  j["op_type"] = d.op_type;
  j["var_axes"] = d.var_axes;
  Json entries = Json::array();
  for (const Entry& e : d.entries) {
    Json x;
    x["axes"] = axes_json(e.axes);
    x.update(choice_json(e.choice));
    x["latency_ms"] = e.latency_ms;
    x["speedup"] = e.speedup;
    x["traces"] = e.traces;
    entries.push_back(std::move(x));
  }
  j["entries"] = std::move(entries);
  if (d.fallback) {
    Json f = choice_json(d.fallback->choice);
    f["axes_won"] = d.fallback->axes_won;
    f["speedup"] = d.fallback->speedup;
    j["fallback"] = std::move(f);
  } else {
    j["fallback"] = nullptr;
  }
  j["excluded_solutions"] = d.excluded_solutions;
  return j;
}

Json options_json(const ApplyOptions& o) {
  Json j;
  j["max_abs_error"] = optional_number(o.max_abs_error);
  j["max_rel_error"] = optional_number(o.max_rel_error);
  j["max_nmse"] = optional_number(o.max_nmse);
  j["allow_failed_solutions"] = o.allow_failed_solutions;
  j["fallback"] = o.fallback;
  j["trusted_key_ids"] = o.trusted.key_ids;
  j["build_cache"] = o.build_cache.string();
  return j;
}

// Reading: every field the writer writes, with a fib::Error naming the JSON path otherwise.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  const Json& at(const Json& j, const std::string& key, const std::string& path) const {
    if (!j.is_object() || !j.contains(key)) fail(path + "." + key, "missing");
    return j.at(key);
  }
  std::string string(const Json& j, const std::string& key, const std::string& path) const {
    const Json& v = at(j, key, path);
    if (!v.is_string()) fail(path + "." + key, "expected a string");
    return v.get<std::string>();
  }
  double number(const Json& j, const std::string& key, const std::string& path) const {
    const Json& v = at(j, key, path);
    if (!v.is_number()) fail(path + "." + key, "expected a number");
    return v.get<double>();
  }
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(where_, fmt::format("{}: {}", path, what),
                "make the table again with `fib apply table`");
  }

 private:
  std::string where_;
};

Choice choice_from(const Json& j, const std::string& path, const Reader& r) {
  Choice c;
  c.solution = r.string(j, "solution", path);
  c.language = r.string(j, "language", path);
  const Json& binding = r.at(j, "binding", path);
  c.binding = binding.is_string() ? binding.get<std::string>() : "";
  c.entry_point = r.string(j, "entry_point", path);
  c.destination_passing_style = r.at(j, "destination_passing_style", path).get<bool>();
  c.digest = r.string(j, "digest", path);
  c.solution_file = r.string(j, "solution_file", path);
  for (const Json& k : r.at(j, "build_keys", path)) c.build_keys.push_back(k.get<std::string>());
  const Json& a = r.at(j, "artifact", path);
  if (a.is_object()) {
    c.artifact =
        Artifact{r.string(a, "kind", path + ".artifact"), r.string(a, "path", path + ".artifact"),
                 r.string(a, "build_key", path + ".artifact")};
  }
  return c;
}

DefinitionTable definition_from(const Json& j, const std::string& path, const Reader& r) {
  DefinitionTable d;
  d.op_type = r.string(j, "op_type", path);
  d.var_axes = r.at(j, "var_axes", path).get<std::vector<std::string>>();
  const Json& entries = r.at(j, "entries", path);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string p = fmt::format("{}.entries[{}]", path, i);
    const Json& x = entries[i];
    Entry e;
    for (const auto& [name, value] : r.at(x, "axes", p).items()) {
      e.axes.emplace_back(name, value.get<std::int64_t>());
    }
    std::sort(e.axes.begin(), e.axes.end());
    e.choice = choice_from(x, p, r);
    e.latency_ms = r.number(x, "latency_ms", p);
    e.speedup = r.number(x, "speedup", p);
    e.traces = r.at(x, "traces", p).get<std::size_t>();
    d.entries.push_back(std::move(e));
  }
  const Json& f = r.at(j, "fallback", path);
  if (f.is_object()) {
    d.fallback = Fallback{choice_from(f, path + ".fallback", r),
                          r.at(f, "axes_won", path + ".fallback").get<std::size_t>(),
                          r.number(f, "speedup", path + ".fallback")};
  }
  d.excluded_solutions = r.at(j, "excluded_solutions", path).get<std::vector<std::string>>();
  return d;
}

ApplyOptions options_from(const Json& j, const Reader& r) {
  ApplyOptions o;
  o.max_abs_error = optional_number(r.at(j, "max_abs_error", "$.options"));
  o.max_rel_error = optional_number(r.at(j, "max_rel_error", "$.options"));
  o.max_nmse = optional_number(r.at(j, "max_nmse", "$.options"));
  o.allow_failed_solutions = r.at(j, "allow_failed_solutions", "$.options").get<bool>();
  o.fallback = r.at(j, "fallback", "$.options").get<bool>();
  for (const Json& k : r.at(j, "trusted_key_ids", "$.options")) {
    o.trusted.key_ids.insert(k.get<std::string>());
  }
  o.build_cache = r.string(j, "build_cache", "$.options");
  return o;
}

}  // namespace

Json to_json(const ApplyTable& table) {
  Json j;
  j["format"] = kFormat;
  j["version"] = kTableFormatVersion;
  j["dataset"] = table.dataset.string();
  j["dataset_digest"] = table.dataset_digest;
  j["options"] = options_json(table.options);
  Json defs = Json::object();
  for (const auto& [name, d] : table.definitions) defs[name] = definition_json(d);
  j["definitions"] = std::move(defs);
  Json skipped = Json::object();
  for (std::size_t i = 0; i < kSkipReasons; ++i) {
    skipped[std::string(skip_reason_name(static_cast<SkipReason>(i)))] = table.skipped[i];
  }
  j["traces_considered"] = table.traces_considered;
  j["traces_used"] = table.traces_used;
  j["skipped"] = std::move(skipped);
  return j;
}

ApplyTable table_from_json(const Json& j, const std::string& where) {
  const Reader r(where);
  if (!j.is_object() || j.value("format", "") != kFormat) {
    r.fail("$.format", fmt::format("not an apply table (expected \"{}\")", kFormat));
  }
  if (!j.contains("version") || j["version"] != kTableFormatVersion) {
    r.fail("$.version", fmt::format("expected {}", kTableFormatVersion));
  }
  try {
    ApplyTable t;
    t.dataset = r.string(j, "dataset", "$");
    t.dataset_digest = r.string(j, "dataset_digest", "$");
    t.options = options_from(r.at(j, "options", "$"), r);
    for (const auto& [name, d] : r.at(j, "definitions", "$").items()) {
      t.definitions.emplace(name, definition_from(d, "$.definitions." + name, r));
    }
    const Json& skipped = r.at(j, "skipped", "$");
    for (std::size_t i = 0; i < kSkipReasons; ++i) {
      t.skipped[i] =
          r.at(skipped, std::string(skip_reason_name(static_cast<SkipReason>(i))), "$.skipped")
              .get<std::size_t>();
    }
    t.traces_considered = r.at(j, "traces_considered", "$").get<std::size_t>();
    t.traces_used = r.at(j, "traces_used", "$").get<std::size_t>();
    return t;
  } catch (const nlohmann::json::exception& e) {
    r.fail("$", fmt::format("a value of the wrong type ({})", e.what()));
  }
}

void resolve_artifacts(ApplyTable& table, const std::filesystem::path& build_cache) {
  for (auto& [name, d] : table.definitions) {
    for (Entry& e : d.entries) e.choice.artifact = detail::find_artifact(e.choice, build_cache);
    if (d.fallback) {
      d.fallback->choice.artifact = detail::find_artifact(d.fallback->choice, build_cache);
    }
  }
}

namespace {

std::string axes_text(const AxisValues& axes) {
  std::string s;
  for (const auto& [name, value] : axes) {
    s += fmt::format("{}{}={}", s.empty() ? "" : ",", name, value);
  }
  return s.empty() ? "(no var axes)" : s;
}

std::string artifact_text(const Choice& c) {
  return c.artifact ? fmt::format(" [{}]", c.artifact->kind) : "";
}

}  // namespace

std::string render_text(const ApplyTable& table) {
  std::string out;
  for (const auto& [name, d] : table.definitions) {
    out += fmt::format("{} ({} axes entries)\n", name, d.entries.size());
    for (const Entry& e : d.entries) {
      out += fmt::format("  {}: {} {:.4g} ms, speedup {:.3g}x, {} trace(s){}\n", axes_text(e.axes),
                         e.choice.solution, e.latency_ms, e.speedup, e.traces,
                         artifact_text(e.choice));
    }
    if (d.fallback) {
      out += fmt::format("  other axes: {} (won {} axes){}\n", d.fallback->choice.solution,
                         d.fallback->axes_won, artifact_text(d.fallback->choice));
    }
    for (const std::string& s : d.excluded_solutions) {
      out += fmt::format("  excluded: {} (a non-PASSED trusted trace)\n", s);
    }
  }
  out += fmt::format("{} evaluation trace(s) read, {} used", table.traces_considered,
                     table.traces_used);
  for (std::size_t i = 0; i < kSkipReasons; ++i) {
    if (table.skipped[i] == 0) continue;
    out += fmt::format("; {} {}", table.skipped[i], skip_reason_name(static_cast<SkipReason>(i)));
  }
  out += "\n";
  return out;
}

}  // namespace fib::apply
