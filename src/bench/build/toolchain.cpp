// Compilers and toolchains: finding a compiler and its identity, the host CPU a -march=native
// build targets, and the toolchain of each supported language.
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <xxhash.h>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "bench/build/process.h"
#include "fib/bench/build.h"

namespace fib::bench {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

bool is_executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

std::optional<fs::path> find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    std::error_code ec;
    fs::path p = fs::absolute(program, ec);
    if (ec || !is_executable_file(p)) return std::nullopt;
    return p;
  }
  const char* env = std::getenv("PATH");
  const std::string path = env != nullptr && *env != '\0' ? env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (is_executable_file(candidate)) {
      std::error_code ec;
      fs::path abs = fs::absolute(candidate, ec);
      return ec ? candidate : abs;
    }
    start = end + 1;
  }
  return std::nullopt;
}

std::string first_line(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (!line.empty()) return std::string(line);
    start = end + 1;
  }
  return {};
}

// The host CPU: machine, model and a hash of its feature flags (what -march=native decides).
const std::string& host_target() {
  static const std::string target = [] {
    utsname u{};
    std::string machine = ::uname(&u) == 0 ? u.machine : "unknown";
    std::string model, features;
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string field = line.substr(0, colon);
      while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.pop_back();
      const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
      if (model.empty() && (field == "model name" || field == "CPU part")) model = value;
      if (features.empty() && (field == "flags" || field == "Features")) features = value;
      if (!model.empty() && !features.empty()) break;
    }
    return fmt::format("{} {} (cpu flags {:016x})", machine, model.empty() ? "cpu" : model,
                       XXH3_64bits(features.data(), features.size()));
  }();
  return target;
}

struct CacheEntry {
  std::uintmax_t size = 0;
  std::int64_t mtime_ns = 0;
  Compiler compiler;
};

std::mutex g_compilers_mutex;
std::map<std::string, CacheEntry>& compilers_cache() {
  static std::map<std::string, CacheEntry> cache;
  return cache;
}

}  // namespace

std::string Compiler::describe() const { return fmt::format("{}, {}", version, resolved.string()); }

std::optional<Compiler> find_compiler(std::string_view spec, std::string* why) {
  std::string ignored;
  if (why == nullptr) why = &ignored;
  std::vector<std::string> words = split_words(spec);
  if (words.empty()) {
    *why = "no compiler given";
    return std::nullopt;
  }
  const auto found = find_program(words[0]);
  if (!found) {
    *why = words[0].find('/') != std::string::npos
               ? fmt::format("compiler '{}' is not an executable file", words[0])
               : fmt::format("compiler '{}' is not found on PATH", words[0]);
    return std::nullopt;
  }
  struct stat st {};
  if (::stat(found->c_str(), &st) != 0) {
    *why = fmt::format("cannot stat {}", found->string());
    return std::nullopt;
  }
  const auto size = static_cast<std::uintmax_t>(st.st_size);
  const std::int64_t mtime_ns = std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  words[0] = found->string();
  std::string cache_key;
  for (const auto& w : words) cache_key += w + '\0';
  {
    std::lock_guard lock(g_compilers_mutex);
    auto it = compilers_cache().find(cache_key);
    if (it != compilers_cache().end() && it->second.size == size &&
        it->second.mtime_ns == mtime_ns) {
      return it->second.compiler;
    }
  }
  Compiler c;
  c.command = words;
  std::error_code ec;
  c.resolved = fs::canonical(*found, ec);
  if (ec) c.resolved = *found;
  std::vector<std::string> argv = words;
  argv.emplace_back("--version");
  const auto r = detail::run_process(
      argv, {}, std::chrono::steady_clock::now() + std::chrono::seconds(60), std::size_t{64} << 10);
  if (!r.succeeded()) {
    *why = fmt::format("`{}` failed{}{}", detail::shell_join(argv), r.started ? "" : ": " + r.error,
                       r.output.empty() ? "" : ": " + first_line(r.output));
    return std::nullopt;
  }
  c.version = first_line(r.output);
  if (c.version.empty()) c.version = "unknown version";
  std::lock_guard lock(g_compilers_mutex);
  compilers_cache()[cache_key] = CacheEntry{size, mtime_ns, c};
  return c;
}

const CompileStep* Toolchain::step_for(std::string_view path) const {
  for (const auto& step : steps) {
    for (const auto& ext : step.extensions) {
      if (path.size() > ext.size() && path.substr(path.size() - ext.size()) == ext) return &step;
    }
  }
  return nullptr;
}

std::string Toolchain::identity() const {
  std::string out = fmt::format("toolchain {}\ntarget {}\n", id, target);
  auto add_compiler = [&](std::string_view role, const Compiler& c) {
    out += fmt::format("{} {} | {} | {}\n", role, fmt::join(c.command, " "), c.resolved.string(),
                       c.version);
  };
  for (const auto& step : steps) {
    add_compiler("compiler." + step.name, step.compiler);
    out += fmt::format("extensions.{} {}\n", step.name, fmt::join(step.extensions, " "));
    for (const auto& f : step.flags) out += fmt::format("flag.{} {}\n", step.name, f);
  }
  add_compiler("linker", linker);
  for (const auto& f : link_flags) out += fmt::format("flag.link {}\n", f);
  return out;
}

std::string Toolchain::describe() const {
  std::vector<std::string> parts;
  for (const auto& step : steps) parts.push_back(step.name + ": " + step.compiler.describe());
  return fmt::format("{} ({})", id, fmt::join(parts, "; "));
}

std::optional<Toolchain> select_toolchain(const Solution& s, const BuildOptions& o,
                                          std::string* unsupported, std::string* error) {
  std::string ignored_u, ignored_e;
  if (unsupported == nullptr) unsupported = &ignored_u;
  if (error == nullptr) error = &ignored_e;
  const std::string& language = s.spec.language;
  const std::string binding = s.spec.binding.value_or("fib");
  if (language != "cpp") {
    *unsupported = fmt::format(
        "language '{}' is not supported by fib's build (it builds language 'cpp' with binding "
        "'fib')",
        language);
    return std::nullopt;
  }
  if (binding != "fib") {
    *unsupported = fmt::format(
        "binding '{}' is not supported for language 'cpp' (fib builds binding 'fib', the ABI "
        "of fib/solution.h; see docs/solutions.md)",
        binding);
    return std::nullopt;
  }
  auto spec_of = [](const std::string& given, const char* env, const char* fallback) {
    if (!given.empty()) return given;
    const char* v = std::getenv(env);
    return std::string(v != nullptr && *v != '\0' ? v : fallback);
  };
  Toolchain tc;
  tc.id = "host-cpp";
  tc.target = host_target();
  tc.header_extensions = {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp", ".tpp"};
  std::string why;
  auto cxx = find_compiler(spec_of(o.cxx, "CXX", "c++"), &why);
  if (!cxx) {
    *error = "C++ compiler: " + why + " (set CXX)";
    return std::nullopt;
  }
  // Relative include paths: commands run in the entry's src/ folder, so diagnostics name the
  // sources as the solution does and the entry stays valid after it is renamed into place.
  const std::vector<std::string> common = {
      "-O3", "-march=native", "-fPIC", "-pthread", "-fvisibility=hidden", "-I../include", "-I."};
  CompileStep cpp{"c++", {".cpp", ".cc", ".cxx"}, *cxx, {"-std=c++17"}};
  cpp.flags.insert(cpp.flags.end(), common.begin(), common.end());
  cpp.flags.insert(cpp.flags.end(), o.extra_flags.begin(), o.extra_flags.end());
  tc.steps.push_back(std::move(cpp));
  bool has_c = false;
  for (const auto& src : s.sources) {
    has_c = has_c || (src.path.size() > 2 && src.path.substr(src.path.size() - 2) == ".c");
  }
  if (has_c) {  // the C compiler joins the key only when a solution has C sources
    auto cc = find_compiler(spec_of(o.cc, "CC", "cc"), &why);
    if (!cc) {
      *error = "C compiler: " + why + " (set CC)";
      return std::nullopt;
    }
    CompileStep c{"c", {".c"}, *cc, {"-std=c11"}};
    c.flags.insert(c.flags.end(), common.begin(), common.end());
    c.flags.insert(c.flags.end(), o.extra_flags.begin(), o.extra_flags.end());
    tc.steps.push_back(std::move(c));
  }
  tc.linker = *cxx;
  tc.link_flags = {"-Wl,--no-undefined", "-lm", "-pthread"};
  tc.link_flags.insert(tc.link_flags.end(), o.extra_ldflags.begin(), o.extra_ldflags.end());
  return tc;
}

}  // namespace fib::bench
