#include "bench/python/find_python.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "bench/build/process.h"

namespace fib::bench {

namespace {

namespace fs = std::filesystem;

bool executable_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// Every `name` on PATH, in order; a name with a slash is itself.
std::vector<fs::path> on_path(const std::string& name) {
  std::vector<fs::path> found;
  if (name.find('/') != std::string::npos) {
    std::error_code ec;
    const fs::path p = fs::absolute(name, ec);
    if (!ec && executable_file(p)) found.push_back(p);
    return found;
  }
  const char* env = std::getenv("PATH");
  const std::string path = env != nullptr && *env != '\0' ? env : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    std::error_code ec;
    if (executable_file(candidate)) found.push_back(fs::absolute(candidate, ec));
    start = end + 1;
  }
  return found;
}

struct Probe {
  bool ok = false;
  std::string version;  // torch.__version__ when ok
  std::string answer;   // the interpreter's last line when not
};

// Whether `python` imports torch. Remembered: the import takes seconds.
Probe probe(const fs::path& python) {
  static std::mutex mu;
  static std::map<std::string, Probe> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = seen.find(python.string()); it != seen.end()) return it->second;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  const detail::ProcessResult r = detail::run_process(
      {python.string(), "-c", "import torch; print('fib-torch', torch.__version__)"},
      fs::temp_directory_path(), deadline, 16 * 1024);
  Probe p;
  const std::string out = r.output;
  const auto at = out.rfind("fib-torch ");
  if (r.succeeded() && at != std::string::npos) {
    p.ok = true;
    p.version = out.substr(at + 10);
    while (!p.version.empty() && (p.version.back() == '\n' || p.version.back() == '\r'))
      p.version.pop_back();
  } else if (!r.started) {
    p.answer = r.error;
  } else {
    std::string text = out;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    const auto nl = text.rfind('\n');
    p.answer = nl == std::string::npos ? text : text.substr(nl + 1);
    if (p.answer.empty()) p.answer = r.timed_out ? "timed out" : "no output";
  }
  std::lock_guard<std::mutex> lock(mu);
  seen.emplace(python.string(), p);
  return p;
}

std::optional<TorchPython> named(const std::string& name, const std::string& source,
                                 std::string* why) {
  const std::vector<fs::path> found = on_path(name);
  if (found.empty()) {
    *why = fmt::format("{} names '{}', which is not an executable", source, name);
    return std::nullopt;
  }
  const Probe p = probe(found.front());
  if (!p.ok) {
    *why = fmt::format("{} names {}, which cannot import torch ({})", source,
                       found.front().string(), p.answer);
    return std::nullopt;
  }
  return TorchPython{found.front().string(), p.version};
}

}  // namespace

std::optional<TorchPython> find_torch_python(const std::string& requested, std::string* why) {
  std::string unused;
  if (why == nullptr) why = &unused;
  if (!requested.empty()) return named(requested, "--python", why);
  if (const char* env = std::getenv("FIB_PYTHON"); env != nullptr && *env != '\0') {
    return named(env, "FIB_PYTHON", why);
  }
  std::vector<fs::path> candidates = on_path("python3");
  candidates.emplace_back("/usr/bin/python3");
  std::vector<std::string> tried;
  for (const fs::path& c : candidates) {
    if (!executable_file(c)) continue;
    const std::string name = c.string();
    if (std::find(tried.begin(), tried.end(), name) != tried.end()) continue;
    tried.push_back(name);
    const Probe p = probe(c);
    if (p.ok) return TorchPython{name, p.version};
  }
  *why = tried.empty() ? std::string("no python3 found on PATH or at /usr/bin/python3")
                       : fmt::format(
                             "no python3 that imports torch (tried {}); install PyTorch "
                             "(apt-get install python3-torch) or name one with --python PATH or "
                             "FIB_PYTHON",
                             fmt::join(tried, ", "));
  return std::nullopt;
}

}  // namespace fib::bench
