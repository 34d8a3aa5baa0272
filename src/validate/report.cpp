// Validation reports as JSON (upstream's shape: config + definitions with one entry per
// check, plus fib's dataset-level messages and hints) and as text.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fib/trace/suggest.h"
#include "fib/validate/validator.h"

namespace fib::validate {

namespace {

Json message_json(const Message& m) {
  Json j = Json::object();
  j["level"] = std::string(severity_name(m.level));
  j["message"] = m.message;
  if (!m.file.empty()) j["file"] = m.file;
  if (!m.path.empty()) j["path"] = m.path;
  if (!m.hint.empty()) j["hint"] = m.hint;
  return j;
}

Json result_json(const CheckResult& c) {
  Json j = Json::object();
  j["status"] = std::string(status_name(c.status));
  Json msgs = Json::array();
  for (const auto& m : c.messages) msgs.push_back(message_json(m));
  j["messages"] = std::move(msgs);
  return j;
}

std::optional<Status> parse_status_name(std::string_view s) {
  if (s == "ok") return Status::kOk;
  if (s == "warning") return Status::kWarning;
  if (s == "error") return Status::kError;
  return std::nullopt;
}

std::optional<Severity> parse_level(std::string_view s) {
  if (s == "info") return Severity::kInfo;
  if (s == "warning") return Severity::kWarning;
  if (s == "error") return Severity::kError;
  return std::nullopt;
}

bool read_result(const Json& j, const JsonPath& p, const ReadContext& ctx, CheckResult& out) {
  static constexpr std::string_view kFields[] = {"status", "messages"};
  const Json* f[2];
  if (!read_object(j, p, ctx, kFields, f, nullptr)) return false;
  bool ok = require_field(f[0], "status", p, ctx);
  out.ran = true;
  if (f[0]) {
    auto s = read_string(*f[0], p.key("status"), ctx);
    auto st = s ? parse_status_name(*s) : std::nullopt;
    if (!st) {
      if (s)
        ctx.error(p.key("status"), fmt::format("unknown status '{}'", *s),
                  "expected ok, warning or error");
      ok = false;
    } else {
      out.status = *st;
    }
  }
  if (f[1]) {
    if (!f[1]->is_array()) {
      ctx.error(p.key("messages"), "expected an array");
      return false;
    }
    for (std::size_t i = 0; i < f[1]->size(); ++i) {
      static constexpr std::string_view kMsgFields[] = {"level", "message", "file", "path", "hint"};
      const Json* g[5];
      const JsonPath list = p.key("messages");
      const JsonPath mp = list.index(i);
      if (!read_object((*f[1])[i], mp, ctx, kMsgFields, g, nullptr)) {
        ok = false;
        continue;
      }
      Message m;
      if (!require_field(g[0], "level", mp, ctx) || !require_field(g[1], "message", mp, ctx)) {
        ok = false;
        continue;
      }
      auto level = read_string(*g[0], mp.key("level"), ctx);
      auto lv = level ? parse_level(*level) : std::nullopt;
      if (!lv) {
        if (level)
          ctx.error(mp.key("level"), fmt::format("unknown level '{}'", *level),
                    "expected info, warning or error");
        ok = false;
        continue;
      }
      m.level = *lv;
      if (auto s = read_string(*g[1], mp.key("message"), ctx))
        m.message = *s;
      else
        ok = false;
      if (g[2]) {
        if (auto s = read_string(*g[2], mp.key("file"), ctx))
          m.file = *s;
        else
          ok = false;
      }
      if (g[3]) {
        if (auto s = read_string(*g[3], mp.key("path"), ctx))
          m.path = *s;
        else
          ok = false;
      }
      if (g[4]) {
        if (auto s = read_string(*g[4], mp.key("hint"), ctx))
          m.hint = *s;
        else
          ok = false;
      }
      out.messages.push_back(std::move(m));
    }
  }
  return ok;
}

std::string message_line(const Message& m) {
  std::string s = fmt::format("[{}] ", severity_name(m.level));
  if (!m.file.empty()) s += m.file + ": ";
  if (!m.path.empty()) s += m.path + ": ";
  s += m.message;
  if (!m.hint.empty()) s += " (" + m.hint + ")";
  return s;
}

}  // namespace

Json report_to_json(const Report& r) {
  Json j = Json::object();
  Json config = Json::object();
  config["dataset"] = r.dataset;
  config["checks"] = r.checks;
  config["disable_gpu"] = true;  // fib's validator runs no GPU work
  config["op_types"] = r.op_types;
  config["definitions"] = r.definitions_filter;
  j["config"] = std::move(config);
  Json summary = Json::object();
  summary["definitions"] = r.definitions.size();
  summary["ok"] = r.count(Status::kOk);
  summary["warning"] = r.count(Status::kWarning);
  summary["error"] = r.count(Status::kError);
  summary["dataset_status"] = std::string(status_name(r.dataset_messages.status));
  j["summary"] = std::move(summary);
  j["dataset"] = result_json(r.dataset_messages);
  Json defs = Json::object();
  for (const auto& d : r.definitions) {
    Json dj = Json::object();
    dj["status"] = std::string(status_name(d.status));
    dj["op_type"] = d.op_type;
    for (auto c : kAllChecks) {
      const auto& res = d.at(c);
      dj[std::string(check_name(c))] = res.ran ? result_json(res) : Json(nullptr);
    }
    dj["benchmark"] = nullptr;  // upstream's GPU check; fib runs solutions with `fib run`
    defs[d.name] = std::move(dj);
  }
  j["definitions"] = std::move(defs);
  return j;
}

std::optional<Report> report_from_json(const Json& j, const ReadContext& ctx) {
  static constexpr std::string_view kFields[] = {"config", "summary", "dataset", "definitions"};
  const Json* f[4];
  const JsonPath root;
  if (!read_object(j, root, ctx, kFields, f, nullptr)) return std::nullopt;
  bool ok = require_field(f[0], "config", root, ctx);
  ok = require_field(f[3], "definitions", root, ctx) && ok;
  Report r;
  if (f[0]) {
    static constexpr std::string_view kConfig[] = {"dataset", "checks", "disable_gpu", "op_types",
                                                   "definitions"};
    const Json* g[5];
    const JsonPath cp = root.key("config");
    if (read_object(*f[0], cp, ctx, kConfig, g, nullptr)) {
      if (require_field(g[0], "dataset", cp, ctx)) {
        if (auto s = read_string(*g[0], cp.key("dataset"), ctx))
          r.dataset = *s;
        else
          ok = false;
      } else {
        ok = false;
      }
      if (g[1]) {
        if (auto v = read_string_list(*g[1], cp.key("checks"), ctx))
          r.checks = *v;
        else
          ok = false;
      }
      if (g[3]) {
        if (auto v = read_string_list(*g[3], cp.key("op_types"), ctx))
          r.op_types = *v;
        else
          ok = false;
      }
      if (g[4]) {
        if (auto v = read_string_list(*g[4], cp.key("definitions"), ctx))
          r.definitions_filter = *v;
        else
          ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (f[2] && !f[2]->is_null())
    ok = read_result(*f[2], root.key("dataset"), ctx, r.dataset_messages) && ok;
  if (f[3]) {
    const JsonPath dp = root.key("definitions");
    if (!f[3]->is_object()) {
      ctx.error(dp, "expected an object of definition name -> report");
      return std::nullopt;
    }
    for (auto it = f[3]->begin(); it != f[3]->end(); ++it) {
      const JsonPath p = dp.key(it.key());
      if (!it.value().is_object()) {
        ctx.error(p, "expected an object");
        ok = false;
        continue;
      }
      DefinitionReport d;
      d.name = it.key();
      for (auto k = it.value().begin(); k != it.value().end(); ++k) {
        const std::string& key = k.key();
        if (key == "status") {
          auto s = k.value().is_string() ? parse_status_name(k.value().get<std::string>())
                                         : std::nullopt;
          if (!s) {
            ctx.error(p.key("status"), "expected ok, warning or error");
            ok = false;
          } else {
            d.status = *s;
          }
        } else if (key == "op_type") {
          if (auto s = read_string(k.value(), p.key("op_type"), ctx))
            d.op_type = *s;
          else
            ok = false;
        } else if (key == "benchmark") {
          continue;
        } else if (auto c = parse_check(key)) {
          if (!k.value().is_null()) ok = read_result(k.value(), p.key(key), ctx, d.at(*c)) && ok;
        } else {
          static constexpr std::string_view kKeys[] = {"status",     "op_type",  "layout",
                                                       "definition", "workload", "solution",
                                                       "trace",      "baseline", "benchmark"};
          ctx.error(p.key(key), fmt::format("unknown field '{}'", key), suggest(key, kKeys));
          ok = false;
        }
      }
      r.definitions.push_back(std::move(d));
    }
  }
  if (!ok) return std::nullopt;
  return r;
}

std::string render_text(const Report& r) {
  std::string out;
  out += "=== fib dataset validation ===\n";
  out += fmt::format("dataset:     {}\n", r.dataset);
  out += fmt::format("checks:      {}\n", fmt::join(r.checks, ", "));
  out += fmt::format("op_types:    {}\n",
                     r.op_types.empty() ? "(all)" : fmt::format("{}", fmt::join(r.op_types, ", ")));
  out += fmt::format("definitions: {}\n\n",
                     r.definitions_filter.empty()
                         ? "(all)"
                         : fmt::format("{}", fmt::join(r.definitions_filter, ", ")));
  out += fmt::format("{} definitions: {} ok, {} warning, {} error\n", r.definitions.size(),
                     r.count(Status::kOk), r.count(Status::kWarning), r.count(Status::kError));
  std::size_t errors = 0, warnings = 0;
  for (const auto& d : r.definitions) {
    for (const auto& c : d.checks) {
      for (const auto& m : c.messages) {
        errors += m.level == Severity::kError;
        warnings += m.level == Severity::kWarning;
      }
    }
  }
  for (const auto& m : r.dataset_messages.messages) {
    errors += m.level == Severity::kError;
    warnings += m.level == Severity::kWarning;
  }
  out += fmt::format("{} error{}, {} warning{}\n", errors, errors == 1 ? "" : "s", warnings,
                     warnings == 1 ? "" : "s");
  if (!r.dataset_messages.messages.empty()) {
    out += fmt::format("\n--- dataset [{}] ---\n", status_name(r.dataset_messages.status));
    for (const auto& m : r.dataset_messages.messages) out += "  " + message_line(m) + "\n";
  }
  for (const auto& d : r.definitions) {
    if (d.status == Status::kOk) continue;
    out += fmt::format("\n--- {} ({}) [{}] ---\n", d.name, d.op_type, status_name(d.status));
    for (auto c : kAllChecks) {
      const auto& res = d.at(c);
      if (!res.ran) continue;
      bool any = false;
      for (const auto& m : res.messages) any = any || m.level != Severity::kInfo;
      if (!any) continue;
      out += fmt::format("  {}: {}\n", check_name(c), status_name(res.status));
      for (const auto& m : res.messages) {
        if (m.level != Severity::kInfo) out += "    " + message_line(m) + "\n";
      }
    }
  }
  return out;
}

}  // namespace fib::validate
