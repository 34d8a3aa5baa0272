// Staging and building solutions of the Python runtime (fib/bench/builder/python_build.h).
#include "fib/bench/builder/python_build.h"

#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <fstream>
#include <set>
#include <sstream>

#include "build_sandbox.h"
#include "fib/base/json.h"
#include "fib/bench/builder/process.h"

namespace fib::bench::detail {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Builds a torch extension the way upstream's torch binding does: torch.utils.cpp_extension.load
// over the solution's compiled sources, in the runtime's python, into the given folder.
constexpr const char* kTorchBuild = R"(
import sys
from torch.utils.cpp_extension import load
name, build_dir, include_dir = sys.argv[1:4]
load(name=name, sources=sys.argv[4:], build_directory=build_dir,
     extra_include_paths=[include_dir], extra_cflags=["-O3"], extra_cuda_cflags=["-O3"],
     verbose=True)
)";

bool is_python_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && (i == 0 || c < '0' || c > '9')) return false;
  }
  return true;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool compiles(std::string_view path) {
  for (const char* ext : {".cpp", ".cc", ".cxx", ".cu"}) {
    if (ends_with(path, ext)) return true;
  }
  return false;
}

// Problems with the sources the runtime need not see; nullopt when there are none.
std::optional<std::string> check_sources(const Solution& s, bool torch) {
  if (s.sources.empty()) return "the solution has no sources";
  std::set<std::string, std::less<>> paths;
  std::string why;
  for (const auto& src : s.sources) {
    if (!is_safe_relative_path(src.path, &why)) {
      return fmt::format("unsafe source path '{}': {} (refused; nothing was written)", src.path,
                         why);
    }
    if (!paths.insert(src.path).second) return fmt::format("duplicate source path '{}'", src.path);
  }
  const std::string& entry = s.spec.entry_point;
  const std::string file = s.spec.entry_file(), symbol = s.spec.entry_symbol();
  if (entry.find("::") == std::string::npos || file.empty() || symbol.empty()) {
    return fmt::format("entry point '{}' is not of the form 'file::function'", entry);
  }
  if (s.source(file) == nullptr) {
    return fmt::format("entry point '{}': file '{}' is not among the sources", entry, file);
  }
  if (!is_python_identifier(symbol)) {
    return fmt::format("entry point '{}': '{}' is not a Python identifier", entry, symbol);
  }
  if (!torch && !ends_with(file, ".py")) {
    return fmt::format("entry point '{}': a {} solution's entry file is a .py file", entry,
                       s.spec.language);
  }
  if (torch && !compiles(file)) {
    return fmt::format("entry point '{}': binding torch compiles .cpp, .cc, .cxx and .cu files",
                       entry);
  }
  return std::nullopt;
}

// Why the runtime cannot run `s`'s language (a package it needs does not import), or nullopt.
std::optional<std::string> missing_package(const Solution& s, const PythonRuntime& p) {
  const std::string& language = s.spec.language;
  if (language == "triton" && p.triton.empty()) {
    return fmt::format(
        "unsupported here: language 'triton' needs the triton package, which {} "
        "cannot import ({})",
        p.describe(), p.triton_error);
  }
  if (language == "tilelang" && p.tilelang.empty()) {
    return fmt::format(
        "unsupported here: language 'tilelang' needs the tilelang package, which "
        "{} cannot import ({})",
        p.describe(), p.tilelang_error);
  }
  return std::nullopt;
}

std::string key_of(const Solution& s, const PythonRuntime& p, bool sandboxed) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  auto field = [&](std::string_view v) {
    const std::uint64_t n = v.size();
    XXH3_128bits_update(st, &n, sizeof n);
    XXH3_128bits_update(st, v.data(), v.size());
  };
  for (const std::string& f :
       {std::string("fib-python-stage-1"), s.spec.language, s.spec.binding_or_default(),
        s.spec.entry_point, p.executable, p.version, p.torch, p.triton, p.tilelang}) {
    field(f);
  }
  if (sandboxed) field("built in the sandbox");  // what an extension's build saw decides it
  for (const auto& src : s.sources) {
    field(src.path);
    field(src.content);
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
  XXH3_freeState(st);
  std::string out;
  for (unsigned char b : c.digest) out += fmt::format("{:02x}", b);
  return out;
}

std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  return fmt::format("{}-{}", ::getpid(), counter.fetch_add(1));
}

// What the worker loads from an entry: the staged entry file, or the extension module.
fs::path loaded_file(const Solution& s, const fs::path& entry, const std::string& key, bool torch) {
  if (torch) return entry / "build" / fmt::format("fib_torch_{}.so", key.substr(0, 16));
  return entry / "src" / s.spec.entry_file();
}

// Compiles the extension in `dir`; nullopt on success, else why not (the log in *log).
std::optional<std::string> build_torch_extension(const Solution& s, const PythonRuntime& p,
                                                 const fs::path& dir, const std::string& key,
                                                 const BuildOptions& o, std::string* log) {
  fs::create_directories(dir / "build");
  std::vector<std::string> argv = {p.executable,
                                   "-c",
                                   kTorchBuild,
                                   fmt::format("fib_torch_{}", key.substr(0, 16)),
                                   (dir / "build").string(),
                                   (dir / "src").string()};
  for (const auto& src : s.sources) {
    if (compiles(src.path)) argv.push_back((dir / "src" / src.path).string());
  }
  // In the build sandbox: the python sees its own prefixes and sys.path (torch's headers and
  // libraries among them) besides what a compiler sees.
  *log += build_sandbox_note(o.sandbox) + "$ " + shell_join(argv) + "\n";
  const auto r =
      o.sandbox.enabled()
          ? run_process(sandboxed_build_command(o.sandbox, python_paths(p), dir, dir / "src", argv),
                        dir / "src", Clock::now() + o.timeout, 1 << 20)
          : run_process(argv, dir / "src", Clock::now() + o.timeout, 1 << 20);
  *log = head_and_tail(*log + r.output);
  if (r.succeeded()) return std::nullopt;
  if (r.timed_out) return fmt::format("the torch extension build timed out");
  return fmt::format("the torch extension did not build (torch.utils.cpp_extension.load in {})",
                     p.describe());
}

}  // namespace

bool runs_in_python(const Solution& s) {
  const std::string& l = s.spec.language;
  return l == "python" || l == "triton" || l == "tilelang" ||
         ((l == "cpp" || l == "cuda") && s.spec.binding_or_default() == "torch");
}

BuildResult build_python_solution(const Solution& s, const BuildOptions& o) {
  const auto t0 = Clock::now();
  BuildResult r;
  auto done = [&](BuildStatus status, std::string message) {
    r.status = status;
    r.message = std::move(message);
    if (r.log.empty() && !r.message.empty()) r.log = r.message + "\n";
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  };
  const bool torch = s.spec.binding_or_default() == "torch";
  std::string why;
  const auto runtime = find_python(o.python, PythonUse::kRuntime, &why);
  if (!runtime) {
    return done(BuildStatus::kUnsupported,
                fmt::format("unsupported here: {} needs a python3 with PyTorch (--python, "
                            "$FIB_PYTHON): {}",
                            torch ? std::string("binding 'torch'")
                                  : fmt::format("language '{}'", s.spec.language),
                            why));
  }
  r.python = runtime;
  r.toolchain = runtime->describe() + (torch ? ", torch.utils.cpp_extension" : "");
  if (auto missing = missing_package(s, *runtime)) return done(BuildStatus::kUnsupported, *missing);
  if (auto problem = check_sources(s, torch)) return done(BuildStatus::kFailed, *problem);
  r.sandboxed = torch && o.sandbox.enabled();
  r.key = key_of(s, *runtime, r.sandboxed);
  const fs::path cache = fs::absolute(o.cache_dir.empty() ? default_cache_dir() : o.cache_dir);
  const fs::path entry = cache / r.key.substr(0, 2) / r.key;
  r.directory = entry;
  std::error_code ec;
  if (!o.force && fs::exists(entry / "meta.json", ec)) {
    std::ifstream in(entry / "build.log");
    std::ostringstream log;
    log << in.rdbuf();
    r.log = log.str();
    r.from_cache = true;
    const fs::path file = loaded_file(s, entry, r.key, torch);
    if (!fs::exists(file, ec)) return done(BuildStatus::kFailed, "the cached build failed");
    r.shared_object = file;
    return done(BuildStatus::kCached, {});
  }
  const fs::path dir = cache / "tmp" / (r.key + "-" + unique_suffix());
  try {
    for (const auto& src : s.sources) {
      fs::create_directories((dir / "src" / src.path).parent_path());
      std::ofstream(dir / "src" / src.path, std::ios::binary) << src.content;
    }
  } catch (const std::exception& e) {
    fs::remove_all(dir, ec);
    return done(BuildStatus::kFailed, fmt::format("cannot stage the sources: {}", e.what()));
  }
  std::optional<std::string> failure;
  if (torch) failure = build_torch_extension(s, *runtime, dir, r.key, o, &r.log);
  r.build_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failure && failure->find("timed out") != std::string::npos) {  // not cached
    fs::remove_all(dir, ec);
    return done(BuildStatus::kFailed, *failure);
  }
  std::ofstream(dir / "build.log") << r.log;
  std::ofstream(dir / "meta.json")
      << dump_json_pretty(Json{{"key", r.key},
                               {"status", failure ? "failed" : "built"},
                               {"message", failure.value_or("")},
                               {"toolchain", r.toolchain},
                               {"python", to_json(*runtime)}});
  fs::create_directories(entry.parent_path(), ec);
  if (o.force) fs::remove_all(entry, ec);
  fs::rename(dir, entry, ec);
  if (ec) fs::remove_all(dir, ec);  // another builder put the same entry in place first
  if (failure) return done(BuildStatus::kFailed, *failure);
  r.shared_object = loaded_file(s, entry, r.key, torch);
  return done(BuildStatus::kBuilt, {});
}

}  // namespace fib::bench::detail
