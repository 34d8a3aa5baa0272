// Finding the python3 fib runs PyTorch code in (fib/bench/builder/python_runtime.h): each candidate
// is asked, once per process, in a child process, where its libpython and packages are and which of
// torch, triton and tilelang it imports; each use then says in its own words why one does not
// serve.
#include "fib/bench/builder/python_runtime.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/bench/builder/process.h"

namespace fib::bench {

namespace fs = std::filesystem;

namespace {

// Prints the runtime's description as one JSON line. A package that fails to import is recorded
// with the reason; only torch is required.
constexpr const char* kProbe = R"(
import json, os, sys, sysconfig
info = {"executable": sys.executable, "version": sys.version.split()[0]}
prefixes = [sys.base_prefix]
if sys.base_exec_prefix != sys.base_prefix:
    prefixes.append(sys.base_exec_prefix)
info["home"] = ":".join(prefixes)
info["path"] = [p for p in sys.path if p]
libdir = sysconfig.get_config_var("LIBDIR") or ""
multiarch = sysconfig.get_config_var("MULTIARCH") or ""
library = ""
for name in (sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LDLIBRARY")):
    if not name or ".so" not in name:
        continue
    for d in (libdir, os.path.join(libdir, multiarch)):
        if os.path.exists(os.path.join(d, name)):
            library = os.path.join(d, name)
            break
    if library:
        break
info["library"] = library
for module in ("torch", "triton", "tilelang"):
    try:
        m = __import__(module)
        info[module] = str(getattr(m, "__version__", "unknown"))
    except BaseException as e:
        info[module] = ""
        info[module + "_error"] = (type(e).__name__ + ": " + str(e)).splitlines()[0]
print("FIB-PYTHON-RUNTIME " + json.dumps(info))
)";

std::string text(const Json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The executable `spec` names: a path, or a program searched on PATH.
std::string resolve_program(const std::string& spec) {
  if (spec.find('/') != std::string::npos) {
    return ::access(spec.c_str(), X_OK) == 0 ? fs::absolute(spec).string() : std::string();
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const fs::path p = fs::path(dir) / spec;
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return {};
}

// The python3 programs to try, in order, without duplicates (by resolved path).
std::vector<std::string> candidates() {
  std::vector<std::string> found;
  std::set<std::string> seen;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    if (::access(p.c_str(), X_OK) != 0) return;
    const std::string real = fs::canonical(p, ec).string();
    if (!ec && seen.insert(real).second) found.push_back(p.string());
  };
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty()) add(fs::path(dir) / "python3");
  }
  add("/usr/bin/python3");
  return found;
}

// What a python3 says of itself: its description, or why there is none.
struct Described {
  std::optional<PythonRuntime> runtime;  // torch may be missing: runtime->torch empty
  std::string torch_error;               // why torch does not import
  std::string failure;                   // why it did not describe itself
};

// Asks `python` for its description, once per process (the imports take seconds).
Described describe(const std::string& python) {
  static std::mutex mu;
  static std::map<std::string, Described> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = seen.find(python); it != seen.end()) return it->second;
  }
  Described d;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  const auto r = detail::run_process({python, "-c", kProbe}, fs::current_path(), deadline, 1 << 20);
  const auto at = r.output.rfind("FIB-PYTHON-RUNTIME ");
  if (!r.succeeded() || at == std::string::npos) {
    d.failure = r.started ? r.output.substr(0, 300) : r.error;
  } else {
    const auto line_end = r.output.find('\n', at);
    const Json j = Json::parse(r.output.substr(at + 19, line_end - at - 19), nullptr, false);
    if (j.is_discarded()) {
      d.failure = "described itself in a form fib cannot read";
    } else {
      d.runtime = python_runtime_from_json(j);
      if (d.runtime->executable.empty()) d.runtime->executable = python;
      d.torch_error = text(j, "torch_error");
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  seen.emplace(python, d);
  return d;
}

// Whether `python` serves `use`: its runtime, or nullopt and *why in the words of that use.
// `source` names where the python came from ("--python", "FIB_PYTHON"; empty: a search).
std::optional<PythonRuntime> serving(const std::string& python, PythonUse use,
                                     const std::string& source, std::string* why) {
  const Described d = describe(python);
  const bool torch = d.runtime && !d.runtime->torch.empty();
  if (use == PythonUse::kReference) {
    if (torch) return d.runtime;
    // The PyTorch reference's wording: where the python came from, and what it answered.
    std::string answer = d.runtime ? d.torch_error : d.failure;
    while (!answer.empty() && answer.back() == '\n') answer.pop_back();
    if (const auto nl = answer.rfind('\n'); nl != std::string::npos) answer = answer.substr(nl + 1);
    *why = fmt::format("{} names {}, which cannot import torch ({})",
                       source.empty() ? "the search" : source, python,
                       answer.empty() ? "no output" : answer);
    return std::nullopt;
  }
  if (!d.runtime) {
    *why = fmt::format("{} did not describe itself ({})", python, d.failure);
    return std::nullopt;
  }
  if (!torch) {
    *why =
        fmt::format("{} ({}) cannot import torch ({})", python, d.runtime->version, d.torch_error);
    return std::nullopt;
  }
  if (d.runtime->library.empty()) {
    *why = fmt::format(
        "{} ({}) has no shared libpython to embed (a python built without --enable-shared)", python,
        d.runtime->version);
    return std::nullopt;
  }
  return d.runtime;
}

std::optional<PythonRuntime> find_uncached(const std::string& given, PythonUse use,
                                           std::string* why) {
  std::string spec = given, source = "--python";
  if (spec.empty()) {
    const char* env = std::getenv("FIB_PYTHON");
    if (env != nullptr) spec = env;
    source = "FIB_PYTHON";
  }
  if (!spec.empty()) {
    const std::string program = resolve_program(spec);
    if (program.empty()) {
      *why = use == PythonUse::kReference
                 ? fmt::format("{} names '{}', which is not an executable", source, spec)
                 : fmt::format("python '{}' was not found", spec);
      return std::nullopt;
    }
    return serving(program, use, source, why);
  }
  std::vector<std::string> tried, reasons;
  for (const auto& python : candidates()) {
    std::string reason;
    if (auto p = serving(python, use, "", &reason)) return p;
    tried.push_back(python);
    reasons.push_back(reason);
  }
  if (use == PythonUse::kReference) {
    *why = tried.empty() ? std::string("no python3 found on PATH or at /usr/bin/python3")
                         : fmt::format(
                               "no python3 that imports torch (tried {}); install PyTorch "
                               "(apt-get install python3-torch) or name one with --python PATH "
                               "or FIB_PYTHON",
                               fmt::join(tried, ", "));
  } else {
    *why = tried.empty()
               ? std::string("no python3 on PATH")
               : fmt::format("no python3 that imports torch: {}", fmt::join(reasons, "; "));
  }
  return std::nullopt;
}

}  // namespace

std::string PythonRuntime::describe() const {
  return fmt::format("python {} ({}), torch {}", version, executable, torch);
}

Json to_json(const PythonRuntime& p) {
  return Json{{"executable", p.executable},
              {"version", p.version},
              {"library", p.library},
              {"home", p.home},
              {"path", p.path},
              {"torch", p.torch},
              {"triton", p.triton},
              {"tilelang", p.tilelang},
              {"triton_error", p.triton_error},
              {"tilelang_error", p.tilelang_error}};
}

PythonRuntime python_runtime_from_json(const Json& j) {
  if (!j.is_object()) throw Error("python runtime", "not a JSON object");
  PythonRuntime p;
  p.executable = text(j, "executable");
  p.version = text(j, "version");
  p.library = text(j, "library");
  p.home = text(j, "home");
  if (const auto it = j.find("path"); it != j.end() && it->is_array()) {
    for (const auto& e : *it) {
      if (e.is_string()) p.path.push_back(e.get<std::string>());
    }
  }
  p.torch = text(j, "torch");
  p.triton = text(j, "triton");
  p.tilelang = text(j, "tilelang");
  p.triton_error = text(j, "triton_error");
  p.tilelang_error = text(j, "tilelang_error");
  return p;
}

std::optional<PythonRuntime> find_python(const std::string& given, PythonUse use,
                                         std::string* why) {
  struct Found {
    std::optional<PythonRuntime> runtime;
    std::string why;
  };
  static std::mutex mu;
  static std::map<std::string, Found> found;
  std::lock_guard<std::mutex> lock(mu);
  const char* env = std::getenv("FIB_PYTHON");
  const std::string key = given + '\n' + (env != nullptr ? env : "") + '\n' +
                          (use == PythonUse::kReference ? "reference" : "runtime");
  auto it = found.find(key);
  if (it == found.end()) {
    Found f;
    f.runtime = find_uncached(given, use, &f.why);
    it = found.emplace(key, std::move(f)).first;
  }
  if (!it->second.runtime && why != nullptr) *why = it->second.why;
  return it->second.runtime;
}

std::vector<fs::path> python_paths(const PythonRuntime& python) {
  std::vector<fs::path> paths;
  if (!python.executable.empty()) {
    std::error_code ec;
    paths.emplace_back(python.executable);
    paths.push_back(fs::canonical(python.executable, ec));
  }
  if (!python.library.empty()) paths.push_back(fs::path(python.library).parent_path());
  const std::string& home = python.home;
  for (std::size_t at = 0; at <= home.size();) {
    const std::size_t end = std::min(home.find(':', at), home.size());
    if (end > at) paths.emplace_back(home.substr(at, end - at));
    at = end + 1;
  }
  for (const std::string& entry : python.path) {
    if (!entry.empty()) paths.emplace_back(entry);
  }
  return paths;
}

}  // namespace fib::bench
