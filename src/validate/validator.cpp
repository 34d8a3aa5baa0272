#include "fib/validate/validator.h"

#include <algorithm>
#include <filesystem>

#include "validate/checks.h"

namespace fib::validate {

namespace {
constexpr std::string_view kCheckNames[] = {"layout",   "definition", "workload",
                                            "solution", "trace",      "baseline"};
constexpr std::string_view kStatusNames[] = {"ok", "warning", "error"};

Status status_of(Severity s) {
  return s == Severity::kError     ? Status::kError
         : s == Severity::kWarning ? Status::kWarning
                                   : Status::kOk;
}
}  // namespace

std::string_view check_name(Check c) { return kCheckNames[static_cast<int>(c)]; }
std::optional<Check> parse_check(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kCheckNames); ++i) {
    if (kCheckNames[i] == name) return static_cast<Check>(i);
  }
  return std::nullopt;
}
std::string_view status_name(Status s) { return kStatusNames[static_cast<int>(s)]; }

void CheckResult::add(Message m) {
  status = std::max(status, status_of(m.level));
  messages.push_back(std::move(m));
}

std::size_t Report::count(Status s) const {
  return static_cast<std::size_t>(
      std::count_if(definitions.begin(), definitions.end(),
                    [s](const DefinitionReport& d) { return d.status == s; }));
}
bool Report::has_errors() const {
  return count(Status::kError) > 0 || dataset_messages.status == Status::kError;
}

namespace detail {

DefinitionReport& Context::report(const std::string& name, const std::string& op_type) {
  auto [it, inserted] = reports.try_emplace(name);
  if (inserted) {
    it->second.name = name;
    for (auto c : kAllChecks) it->second.at(c).ran = enabled(c);
  }
  if (it->second.op_type.empty()) it->second.op_type = op_type;
  return it->second;
}
CheckResult& Context::result(const std::string& name, Check c) { return report(name).at(c); }
bool Context::enabled(Check c) const {
  return std::find(options.checks.begin(), options.checks.end(), c) != options.checks.end();
}

Message message(Severity level, std::string text, std::string file, std::string path,
                std::string hint) {
  return Message{level, std::move(text), std::move(file), std::move(path), std::move(hint)};
}
Message from_diagnostic(const Diagnostic& d) {
  return Message{d.severity, d.message, d.file, d.path, d.hint};
}

FileOwner owner_of(const std::string& relative_path) {
  std::string p = relative_path;
  // Drop a ":LINE" suffix from JSONL record locations.
  if (auto colon = p.rfind(':');
      colon != std::string::npos &&
      p.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
    p = p.substr(0, colon);
  }
  std::vector<std::string> parts;
  for (const auto& part : std::filesystem::path(p)) parts.push_back(part.string());
  FileOwner o;
  if (parts.empty()) return o;
  auto stem = [](const std::string& f) { return std::filesystem::path(f).stem().string(); };
  const std::string& top = parts[0];
  if (top == "definitions" && parts.size() == 3) {
    o = {stem(parts[2]), parts[1], Check::kDefinition};
  } else if (top == "workloads" && parts.size() == 3) {
    o = {stem(parts[2]), parts[1], Check::kWorkload};
  } else if (top == "solutions" && parts.size() == 5) {
    o = {parts[3], parts[2], Check::kSolution};
  } else if (top == "traces" && parts.size() == 4) {
    o = {stem(parts[3]), parts[2], Check::kTrace};
  }
  return o;
}

std::string name_family(const std::string& name) {
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      if (out.empty() || out.back() != '*') out += '*';
    } else {
      out += name[i];
    }
  }
  return out;
}

}  // namespace detail

Report validate_dataset(const TraceSet& set, const Options& options) {
  detail::Context ctx{set, options, {}, {}, false};
  std::error_code ec;
  ctx.has_blob_folder = std::filesystem::is_directory(set.root() / "blob", ec);
  for (const auto& d : set.definitions()) ctx.report(d.value.name, d.value.op_type);

  // Problems met while loading belong to the definition whose file they are in.
  for (const auto& d : set.load_diagnostics()) {
    const auto owner = detail::owner_of(d.file);
    if (owner.definition.empty()) {
      ctx.dataset.add(detail::from_diagnostic(d));
      continue;
    }
    ctx.report(owner.definition, owner.op_type).at(owner.check).add(detail::from_diagnostic(d));
  }

  if (ctx.enabled(Check::kLayout)) detail::check_layout(ctx);
  if (ctx.enabled(Check::kDefinition)) detail::check_definitions(ctx);
  if (ctx.enabled(Check::kWorkload)) detail::check_workloads(ctx);
  if (ctx.enabled(Check::kSolution)) detail::check_solutions(ctx);
  if (ctx.enabled(Check::kTrace)) detail::check_traces(ctx);
  if (ctx.enabled(Check::kBaseline)) detail::check_baselines(ctx);

  Report r;
  r.dataset = set.root().string();
  for (auto c : options.checks) r.checks.emplace_back(check_name(c));
  r.op_types = options.op_types;
  r.definitions_filter = options.definitions;
  const bool filtered = !options.op_types.empty() || !options.definitions.empty();
  for (auto& [name, rep] : ctx.reports) {
    if (filtered) {
      const bool by_name = std::find(options.definitions.begin(), options.definitions.end(),
                                     name) != options.definitions.end();
      const bool by_op = std::find(options.op_types.begin(), options.op_types.end(), rep.op_type) !=
                         options.op_types.end();
      if (!by_name && !by_op) continue;
    }
    rep.status = Status::kOk;
    for (const auto& c : rep.checks) rep.status = std::max(rep.status, c.status);
    r.definitions.push_back(std::move(rep));
  }
  r.dataset_messages = std::move(ctx.dataset);
  r.dataset_messages.ran = true;
  return r;
}

}  // namespace fib::validate
