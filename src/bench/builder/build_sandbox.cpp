// The build sandbox's command lines (build_sandbox.h).
#include "build_sandbox.h"

#include <fmt/format.h>

#include <cstdlib>

#include "fib/bench/builder/bwrap.h"

namespace fib::bench::detail {

namespace fs = std::filesystem;

namespace {

// The uid the compilers run as inside (nobody); their files belong to fib's user outside.
constexpr unsigned kBuildUid = 65534;

// Variables a compiler or torch's extension builder reads, passed on where fib has them.
constexpr const char* kPassedOn[] = {
    "PATH",     "LANG", "LC_ALL", "LC_MESSAGES", "CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST",
    "MAX_JOBS", "CXX",  "CC"};

void add_absolute(std::string_view word, std::vector<fs::path>& paths) {
  if (!word.empty() && word.front() == '/') paths.emplace_back(std::string(word));
}

}  // namespace

std::vector<fs::path> paths_named_in(const std::vector<std::string>& args) {
  std::vector<fs::path> paths;
  for (const std::string& arg : args) {
    add_absolute(arg, paths);
    for (const char* prefix : {"-I", "-L", "-isystem", "-iquote", "-idirafter", "-B"}) {
      const std::string_view p = prefix;
      if (arg.size() > p.size() && arg.compare(0, p.size(), p) == 0) {
        add_absolute(std::string_view(arg).substr(p.size()), paths);
      }
    }
    std::size_t at = 0;
    while ((at = arg.find_first_of(",=", at)) != std::string::npos) {
      ++at;
      const std::size_t end = arg.find_first_of(",=", at);
      add_absolute(std::string_view(arg).substr(at, end == std::string::npos ? end : end - at),
                   paths);
    }
  }
  return paths;
}

std::vector<fs::path> toolchain_paths(const Toolchain& tc) {
  std::vector<fs::path> paths;
  const auto add_compiler = [&paths](const Compiler& c) {
    for (const fs::path& p : paths_named_in(c.command)) paths.push_back(p.parent_path());
    if (!c.resolved.empty()) paths.push_back(c.resolved.parent_path());
  };
  for (const CompileStep& step : tc.steps) {
    add_compiler(step.compiler);
    for (fs::path& p : paths_named_in(step.flags)) paths.push_back(std::move(p));
  }
  add_compiler(tc.linker);
  for (fs::path& p : paths_named_in(tc.link_flags)) paths.push_back(std::move(p));
  return paths;
}

std::vector<std::string> sandboxed_build_command(const BuildSandbox& sandbox,
                                                 const std::vector<fs::path>& toolchain,
                                                 const fs::path& build_dir, const fs::path& cwd,
                                                 const std::vector<std::string>& argv) {
  std::vector<std::string> a = bwrap_base_arguments(sandbox.bwrap, kBuildUid, "fib-build");
  std::vector<fs::path> visible = {"/usr", "/etc/ld.so.cache", "/etc/alternatives"};
  visible.insert(visible.end(), sandbox.read_only.begin(), sandbox.read_only.end());
  visible.insert(visible.end(), toolchain.begin(), toolchain.end());
  a.push_back("--clearenv");
  for (const char* name : kPassedOn) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    a.insert(a.end(), {"--setenv", name, value});
    if (std::string_view(name).starts_with("CUDA_")) add_absolute(value, visible);
  }
  a.insert(a.end(), {"--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp"});
  for (const fs::path& p : distinct_existing_paths(visible)) {
    // The build's own folder is bound read-write below, whatever else names it; a folder that
    // holds it holds the rest of the build cache, which stays out of sight (a toolchain there
    // goes missing: the build fails, nothing leaks).
    if (path_under(p, build_dir) || path_under(build_dir, p)) continue;
    a.insert(a.end(), {"--ro-bind", p.string(), p.string()});
  }
  a.insert(a.end(),
           {"--bind", build_dir.string(), build_dir.string(), "--chdir", cwd.string(), "--"});
  a.insert(a.end(), argv.begin(), argv.end());
  return a;
}

std::string head_and_tail(const std::string& log) {
  constexpr std::size_t kKept = 32 * 1024;
  if (log.size() <= 2 * kKept) return log;
  return log.substr(0, kKept) +
         fmt::format(
             "\n# ... {} bytes of the build log left out (the first and last {} KiB are "
             "kept) ...\n",
             log.size() - 2 * kKept, kKept / 1024) +
         log.substr(log.size() - kKept);
}

std::string build_sandbox_note(const BuildSandbox& sandbox) {
  if (!sandbox.enabled()) return "# compilers run unsandboxed, as fib's user\n";
  return "# compilers run in a bubblewrap sandbox: they see this build's folder, the toolchains "
         "and a private /tmp, nothing else\n";
}

}  // namespace fib::bench::detail
