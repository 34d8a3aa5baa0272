// The workers' sandbox: the bubblewrap command line that starts `fib worker` (or the PyTorch
// reference's python) in its own namespaces, and the read-only paths a worker needs to find its
// libraries.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "fib/bench/builder/bwrap.h"
#include "fib/bench/launch/worker_process.h"

namespace fib::bench {

namespace fs = std::filesystem;

namespace {

// The folders of the shared libraries this process has mapped: the worker is the same fib
// binary (or, in tests, links the same libraries), so it needs the same folders. /usr is bound
// whole; only the folders elsewhere (an RPATH into unpacked packages, a Python prefix) count.
std::vector<fs::path> mapped_library_folders() {
  std::ifstream maps("/proc/self/maps");
  std::set<fs::path> dirs;
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos || line.find(" (deleted)") != std::string::npos) continue;
    const fs::path file = line.substr(slash);
    if (file.filename().string().find(".so") == std::string::npos) continue;
    if (path_under(file, "/usr") || path_under(file, "/dev")) continue;
    dirs.insert(file.parent_path());
  }
  return {dirs.begin(), dirs.end()};
}

void add_gpu_devices(std::vector<std::string>& a) {
  std::error_code ec;
  std::vector<std::string> nodes;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("nvidia", 0) == 0) nodes.push_back(e.path().string());
  }
  std::sort(nodes.begin(), nodes.end());
  for (const auto& n : nodes) a.insert(a.end(), {"--dev-bind", n, n});
}

}  // namespace

std::vector<fs::path> sandbox_read_only_paths(const fs::path& executable,
                                              const std::vector<fs::path>& extra) {
  // /etc/alternatives: Debian's switchable libraries (libblas.so.3, which torch loads) are
  // symlinks through it.
  std::vector<fs::path> paths = {"/usr", "/etc/ld.so.cache", "/etc/alternatives"};
  for (const fs::path& d : mapped_library_folders()) paths.push_back(d);
  std::error_code ec;
  paths.push_back(fs::weakly_canonical(executable, ec));
  for (const fs::path& e : extra) paths.push_back(e);
  return distinct_existing_paths(paths);
}

std::vector<std::string> worker_writable_paths(const WorkerSpec& spec) {
  std::vector<std::string> paths;
  if (spec.sandbox.enabled()) {
    // All private to the sandbox: its tmpfs /tmp and /dev/shm, its /dev (null, zero, ...; a GPU's
    // nodes, which need write access to be opened and their ioctls), the box's out/.
    paths = {"/tmp", "/dev/shm", "/dev"};
    // Landlock sees the sandbox's own paths: the box's out/ where it is bound inside.
    if (!spec.sandbox.box.empty()) paths.push_back((spec.sandbox.box_inside / "out").string());
    return paths;
  }
  // Unsandboxed: the run's scratch folder (its HOME and TMPDIR, where the outputs go), the
  // shared-memory folder, and the device nodes code writes to.
  if (!spec.home.empty()) paths.push_back(spec.home.string());
  for (const char* p : {"/dev/shm", "/dev/null", "/dev/zero", "/dev/full"}) paths.emplace_back(p);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    if (e.path().filename().string().rfind("nvidia", 0) == 0) paths.push_back(e.path().string());
  }
  return paths;
}

std::vector<std::string> worker_command(const WorkerSpec& spec) {
  std::vector<std::string> worker = {spec.executable.string(), "worker", "--channel", "3"};
  for (const std::string& p : worker_writable_paths(spec)) {
    worker.insert(worker.end(), {"--writable", p});
  }
  if (!spec.sandbox.enabled()) return worker;
  return sandbox_command(spec.sandbox, worker);
}

std::vector<std::string> sandbox_command(const SandboxSpec& s,
                                         const std::vector<std::string>& command) {
  std::vector<std::string> a = bwrap_base_arguments(s.bwrap, s.uid, "fib-worker");
  // Read-only, as the worker needs it: the cache sizes the CPU timer's flush is sized by, the
  // CPUs OpenMP and torch count, the PCI and NUMA description NVML and CUDA read.
  if (std::error_code ec; fs::exists("/sys", ec)) a.insert(a.end(), {"--ro-bind", "/sys", "/sys"});
  for (const fs::path& p : s.read_only) a.insert(a.end(), {"--ro-bind", p.string(), p.string()});
  if (!s.box.empty()) {
    const std::string inside = s.box_inside.string();
    a.insert(a.end(), {"--ro-bind", s.box.string(), inside, "--bind", (s.box / "out").string(),
                       (s.box_inside / "out").string()});
  }
  if (s.gpu) add_gpu_devices(a);
  a.insert(a.end(), {"--chdir", "/tmp", "--"});
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

}  // namespace fib::bench
