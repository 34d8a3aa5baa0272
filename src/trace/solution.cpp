#include "fib/trace/solution.h"

#include <fmt/format.h>

#include "fib/trace/suggest.h"

namespace fib {

namespace {

constexpr std::string_view kSolFields[] = {"name", "definition", "author",
                                           "spec", "sources",    "description"};
enum { kName, kDefinition, kAuthor, kSpec, kSources, kDescription };
constexpr std::string_view kSpecFields[] = {
    "language",     "target_hardware",           "entry_point",
    "dependencies", "destination_passing_style", "binding"};
enum { kLanguage, kTarget, kEntry, kDeps, kDps, kBinding };
constexpr std::string_view kSrcFields[] = {"path", "content"};

std::optional<BuildSpec> read_spec(const Json& j, const JsonPath& path, const ReadContext& ctx) {
  const Json* f[6];
  BuildSpec s;
  if (!read_object(j, path, ctx, kSpecFields, f, &s.key_order)) return std::nullopt;
  bool ok = require_field(f[kLanguage], "language", path, ctx);
  ok = require_field(f[kEntry], "entry_point", path, ctx) && ok;
  if (f[kLanguage]) {
    if (auto v = read_string(*f[kLanguage], path.key("language"), ctx, false)) {
      s.language = *v;
      bool known = false;
      for (auto l : kSolutionLanguages) known = known || l == *v;
      if (!known) {
        ctx.error(path.key("language"), fmt::format("unknown language '{}'", *v),
                  suggest(*v, kSolutionLanguages));
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (f[kTarget]) {
    if (auto v = read_string_list(*f[kTarget], path.key("target_hardware"), ctx)) {
      s.target_hardware = std::move(*v);
    } else {
      ok = false;
    }
  }
  if (f[kEntry]) {
    if (auto v = read_string(*f[kEntry], path.key("entry_point"), ctx, false)) {
      s.entry_point = *v;
      const auto p = v->find("::");
      if (p == std::string::npos || v->find("::", p + 2) != std::string::npos || p == 0 ||
          p + 2 >= v->size()) {
        ctx.error(path.key("entry_point"),
                  fmt::format("entry point '{}' is not of the form 'file::symbol'", *v),
                  "e.g. \"kernel.cu::run\"");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (f[kDeps]) {
    if (auto v = read_string_list(*f[kDeps], path.key("dependencies"), ctx))
      s.dependencies = std::move(*v);
    else
      ok = false;
  }
  if (f[kDps]) {
    if (auto v = read_bool(*f[kDps], path.key("destination_passing_style"), ctx))
      s.destination_passing_style = *v;
    else
      ok = false;
  }
  if (f[kBinding] && !f[kBinding]->is_null()) {
    if (auto v = read_string(*f[kBinding], path.key("binding"), ctx)) {
      s.binding = *v;
      bool known = false;
      for (auto b : kSolutionBindings) known = known || b == *v;
      if (!known) {
        ctx.error(path.key("binding"), fmt::format("unknown binding '{}'", *v),
                  suggest(*v, kSolutionBindings));
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return s;
}

}  // namespace

std::string BuildSpec::entry_file() const {
  const auto p = entry_point.find("::");
  return p == std::string::npos ? entry_point : entry_point.substr(0, p);
}
std::string BuildSpec::entry_symbol() const {
  const auto p = entry_point.find("::");
  return p == std::string::npos ? std::string() : entry_point.substr(p + 2);
}

const SourceFile* Solution::source(std::string_view path) const {
  for (const auto& s : sources) {
    if (s.path == path) return &s;
  }
  return nullptr;
}

bool is_safe_relative_path(std::string_view path, std::string* why) {
  auto fail = [&](const char* m) {
    if (why) *why = m;
    return false;
  };
  if (path.empty()) return fail("the path is empty");
  if (path.front() == '/') return fail("the path is absolute");
  if (path.find('\\') != std::string_view::npos) return fail("the path contains a backslash");
  if (path.find('\0') != std::string_view::npos) return fail("the path contains a NUL byte");
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, end - start);
    if (part == "..") return fail("the path climbs out of its folder with '..'");
    if (part.empty() || part == ".") return fail("the path has an empty or '.' component");
    start = end + 1;
  }
  return true;
}

std::optional<Solution> solution_from_json(const Json& j, const ReadContext& ctx) {
  const std::size_t errors_before = ctx.errors;
  const JsonPath root;
  const Json* f[6];
  Solution s;
  if (!read_object(j, root, ctx, kSolFields, f, &s.key_order)) return std::nullopt;
  bool ok = true;
  for (int req : {kName, kDefinition, kAuthor, kSpec, kSources}) {
    ok = require_field(f[req], kSolFields[req], root, ctx) && ok;
  }
  auto str = [&](int idx, std::string& out) {
    if (!f[idx]) return;
    if (auto v = read_string(*f[idx], root.key(kSolFields[idx]), ctx, false))
      out = *v;
    else
      ok = false;
  };
  str(kName, s.name);
  str(kDefinition, s.definition);
  str(kAuthor, s.author);
  if (f[kDescription] && !f[kDescription]->is_null()) {
    if (auto v = read_string(*f[kDescription], root.key("description"), ctx))
      s.description = *v;
    else
      ok = false;
  }
  std::optional<BuildSpec> spec;
  if (f[kSpec]) {
    spec = read_spec(*f[kSpec], root.key("spec"), ctx);
    if (spec)
      s.spec = *spec;
    else
      ok = false;
  }
  if (f[kSources]) {
    const JsonPath sp = root.key("sources");
    if (!f[kSources]->is_array()) {
      ctx.error(sp, fmt::format("expected an array of {{path, content}}, found {}",
                                json_kind(*f[kSources])));
      ok = false;
    } else {
      if (f[kSources]->empty()) {
        ctx.error(sp, "a solution needs at least one source file");
        ok = false;
      }
      for (std::size_t i = 0; i < f[kSources]->size(); ++i) {
        const JsonPath ip = sp.index(i);
        const Json* g[2];
        SourceFile src;
        if (!read_object((*f[kSources])[i], ip, ctx, kSrcFields, g, &src.key_order)) {
          ok = false;
          continue;
        }
        bool sok = require_field(g[0], "path", ip, ctx);
        sok = require_field(g[1], "content", ip, ctx) && sok;
        if (g[0]) {
          if (auto v = read_string(*g[0], ip.key("path"), ctx, false)) {
            src.path = *v;
            std::string why;
            if (!is_safe_relative_path(*v, &why)) {
              ctx.error(ip.key("path"), fmt::format("unsafe source path '{}': {}", *v, why),
                        "use a relative path inside the solution, e.g. \"src/kernel.cu\"");
              sok = false;
            } else if (s.source(*v) != nullptr) {
              ctx.error(ip.key("path"), fmt::format("duplicate source path '{}'", *v));
              sok = false;
            }
          } else {
            sok = false;
          }
        }
        if (g[1]) {
          if (auto v = read_string(*g[1], ip.key("content"), ctx, false))
            src.content = std::move(*v);
          else
            sok = false;
        }
        if (sok)
          s.sources.push_back(std::move(src));
        else
          ok = false;
      }
    }
  }
  if (spec && ok) {
    const std::string file = s.spec.entry_file();
    if (s.source(file) == nullptr) {
      std::vector<std::string> paths;
      for (const auto& src : s.sources) paths.push_back(src.path);
      ctx.error(root.key("spec").key("entry_point"),
                fmt::format("entry point file '{}' is not among the sources", file),
                suggest(file, paths));
      ok = false;
    }
  }
  if (!ok || ctx.errors != errors_before) return std::nullopt;
  return s;
}

Json to_json(const Solution& s) {
  Json v[6];
  v[kName] = s.name;
  v[kDefinition] = s.definition;
  v[kAuthor] = s.author;
  {
    Json sv[6];
    sv[kLanguage] = s.spec.language;
    sv[kTarget] = s.spec.target_hardware;
    sv[kEntry] = s.spec.entry_point;
    if (!s.spec.dependencies.empty() || s.spec.key_order.contains(kDeps))
      sv[kDeps] = s.spec.dependencies;
    if (s.spec.destination_passing_style) sv[kDps] = *s.spec.destination_passing_style;
    if (s.spec.binding) sv[kBinding] = *s.spec.binding;
    static constexpr bool kAlways[] = {true, true, true, false, false, false};
    v[kSpec] = write_object(kSpecFields, sv, s.spec.key_order, kAlways);
  }
  Json sources = Json::array();
  for (const auto& src : s.sources) {
    Json gv[2] = {src.path, src.content};
    static constexpr bool kAlways[] = {true, true};
    sources.push_back(write_object(kSrcFields, gv, src.key_order, kAlways));
  }
  v[kSources] = std::move(sources);
  if (s.description) v[kDescription] = *s.description;
  static constexpr bool kAlways[] = {true, true, true, true, true, false};
  return write_object(kSolFields, v, s.key_order, kAlways);
}

}  // namespace fib
