// The bundled model list. The folder is found at run time: $FIB_MODELS_DIR, the source tree this
// file was compiled from (no install step needed for a build tree), or an install's share/.
#include "fib/onboard/model_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "fib/base/json.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/suggest.h"

namespace fib::onboard {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kFields[] = {"name",    "hf_repo",    "aliases",
                                        "serving", "provenance", "config"};
enum Field { kName, kHfRepo, kAliases, kServing, kProvenance, kConfig };

bool read_quantization(const Json& v, const JsonPath& path, const ReadContext& ctx,
                       BundledModel& m) {
  const auto s = read_string(v, path, ctx);
  if (!s) return false;
  m.quantization = parse_quantization(*s);
  if (!m.quantization) {
    const auto names = quantization_names();
    ctx.error(path, fmt::format("unknown quantization '{}'", *s), suggest(*s, names));
  }
  return m.quantization.has_value();
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::optional<std::vector<int>> read_sizes(const Json& j, const JsonPath& path,
                                           const ReadContext& ctx) {
  if (!j.is_array() || j.empty()) {
    ctx.error(path, fmt::format("expected a non-empty list of positive integers, found {}",
                                json_preview(j)));
    return std::nullopt;
  }
  std::vector<int> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    auto v = read_int(j[i], path.index(i), ctx);
    if (!v) return std::nullopt;
    if (*v <= 0 || *v > 1024) {
      ctx.error(path.index(i), fmt::format("expected a parallel size in 1..1024, found {}", *v));
      return std::nullopt;
    }
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

fs::path source_tree_models() {
  // The build names the source tree (src/CMakeLists.txt): __FILE__ may be relative to the build
  // folder (compiler caches rewrite it), which would make the path depend on the working folder.
  return fs::path(FIB_SOURCE_DIR) / "models";
}

}  // namespace

fs::path models_dir() {
  if (const char* env = std::getenv("FIB_MODELS_DIR"); env && *env) {
    if (fs::is_directory(env)) return fs::path(env);
    throw Error(env, "FIB_MODELS_DIR does not name a folder", "unset it to use the bundled models");
  }
  std::vector<fs::path> candidates = {source_tree_models()};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share" / "fib" / "models");
  for (const auto& c : candidates) {
    if (fs::is_directory(c)) return c;
  }
  std::vector<std::string> looked = {"$FIB_MODELS_DIR (unset)"};
  for (const auto& c : candidates) looked.push_back(c.string());
  throw Error("models",
              fmt::format("no bundled models folder found; looked in: {}", fmt::join(looked, ", ")),
              "set FIB_MODELS_DIR to the models/ folder of a fib checkout");
}

std::optional<BundledModel> read_bundled_model(const fs::path& file, Diagnostics& diag) {
  auto j = read_json_file(file.string(), diag);
  if (!j) return std::nullopt;
  const ReadContext ctx{file.string(), &diag};
  const JsonPath root;
  const std::size_t errors_before = diag.count(Severity::kError);
  const Json* f[std::size(kFields)] = {};
  if (!read_object(*j, root, ctx, kFields, f, nullptr)) return std::nullopt;
  BundledModel m;
  m.slug = file.stem().string();
  m.path = file;
  bool ok =
      require_field(f[kName], "name", root, ctx) && require_field(f[kConfig], "config", root, ctx);
  if (f[kName]) {
    if (auto s = read_string(*f[kName], root.key("name"), ctx, false))
      m.display_name = *s;
    else
      ok = false;
  }
  if (f[kHfRepo]) {
    if (auto s = read_string(*f[kHfRepo], root.key("hf_repo"), ctx))
      m.hf_repo = *s;
    else
      ok = false;
  }
  if (f[kProvenance]) {
    if (auto s = read_string(*f[kProvenance], root.key("provenance"), ctx))
      m.provenance = *s;
    else
      ok = false;
  }
  if (f[kAliases]) {
    if (auto s = read_string_list(*f[kAliases], root.key("aliases"), ctx))
      m.aliases = *s;
    else
      ok = false;
  }
  m.tp = {1};
  m.ep = {1};
  if (f[kServing]) {
    static constexpr std::string_view kServingFields[] = {"tp", "ep", "quantization"};
    const Json* s[3] = {};
    const JsonPath sp = root.key("serving");
    if (read_object(*f[kServing], sp, ctx, kServingFields, s, nullptr)) {
      if (s[0]) {
        if (auto v = read_sizes(*s[0], sp.key("tp"), ctx))
          m.tp = *v;
        else
          ok = false;
      }
      if (s[1]) {
        if (auto v = read_sizes(*s[1], sp.key("ep"), ctx))
          m.ep = *v;
        else
          ok = false;
      }
      if (s[2]) ok = read_quantization(*s[2], sp.key("quantization"), ctx, m) && ok;
    } else {
      ok = false;
    }
  }
  if (f[kConfig]) {
    if (!f[kConfig]->is_object()) {
      ctx.error(root.key("config"),
                fmt::format("expected an object, found {}", json_kind(*f[kConfig])));
      ok = false;
    } else {
      m.config = *f[kConfig];
    }
  }
  if (!ok || diag.count(Severity::kError) > errors_before) return std::nullopt;
  return m;
}

std::vector<BundledModel> load_bundled_models(const fs::path& dir, Diagnostics& diag) {
  std::vector<BundledModel> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    if (auto m = read_bundled_model(e.path(), diag)) out.push_back(std::move(*m));
  }
  if (ec)
    diag.error(dir.string(), "", fmt::format("cannot list the models folder: {}", ec.message()));
  std::sort(out.begin(), out.end(),
            [](const BundledModel& a, const BundledModel& b) { return a.slug < b.slug; });
  return out;
}

const BundledModel* find_model(const std::vector<BundledModel>& models, std::string_view name) {
  const std::string n = lower(name);
  for (const auto& m : models) {
    if (lower(m.slug) == n) return &m;
  }
  for (const auto& m : models) {
    for (const auto& a : m.aliases) {
      if (lower(a) == n) return &m;
    }
  }
  return nullptr;
}

std::vector<std::string> closest_models(const std::vector<BundledModel>& models,
                                        std::string_view name, std::size_t n) {
  struct Scored {
    std::size_t distance;
    std::size_t prefix;
    std::string slug;
  };
  const std::string q = lower(name);
  std::vector<Scored> scored;
  for (const auto& m : models) {
    std::size_t best = edit_distance(q, m.slug);
    for (const auto& a : m.aliases) best = std::min(best, edit_distance(q, a));
    std::size_t prefix = 0;
    while (prefix < q.size() && prefix < m.slug.size() && q[prefix] == m.slug[prefix]) ++prefix;
    scored.push_back({best, prefix, m.slug});
  }
  std::sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
    if (a.distance != b.distance) return a.distance < b.distance;
    if (a.prefix != b.prefix) return a.prefix > b.prefix;
    return a.slug < b.slug;
  });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < n; ++i) out.push_back(scored[i].slug);
  return out;
}

}  // namespace fib::onboard
