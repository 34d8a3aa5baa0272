// The workers' sandbox: the bubblewrap command line that starts `fib worker` (or the PyTorch
// reference's python) in its own namespaces, and the read-only paths a worker needs to find its
// libraries.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include "fib/bench/launch/worker_process.h"

namespace fib::bench {

namespace fs = std::filesystem;

namespace {

bool under(const fs::path& p, const fs::path& dir) {
  const std::string s = p.string(), d = dir.string();
  return s == d || (s.size() > d.size() && s.compare(0, d.size(), d) == 0 && s[d.size()] == '/');
}

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
    if (under(file, "/usr") || under(file, "/dev")) continue;
    dirs.insert(file.parent_path());
  }
  return {dirs.begin(), dirs.end()};
}

// /bin, /lib, ... are symlinks into /usr on merged-/usr systems (the sandbox makes the same
// links) and folders elsewhere (bound read-only).
void add_root_links(std::vector<std::string>& a) {
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    std::error_code ec;
    const auto st = fs::symlink_status(top, ec);
    if (ec || !fs::exists(st)) continue;
    if (fs::is_symlink(st)) {
      a.insert(a.end(), {"--symlink", fs::read_symlink(top, ec).string(), top});
    } else {
      a.insert(a.end(), {"--ro-bind", top, top});
    }
  }
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
  std::vector<fs::path> kept;
  for (const fs::path& p : paths) {
    if (p.empty() || !fs::exists(p, ec)) continue;
    const bool covered =
        std::any_of(kept.begin(), kept.end(), [&](const fs::path& k) { return under(p, k); });
    if (!covered) kept.push_back(p);
  }
  return kept;
}

fs::path find_bwrap() {
  // $FIB_BWRAP names the binary (the GPU machine carries Debian's package unpacked,
  // scripts/device/env.sh); set, it is the only one tried.
  if (const char* bwrap = std::getenv("FIB_BWRAP")) {
    return ::access(bwrap, X_OK) == 0 ? fs::path(bwrap) : fs::path();
  }
  for (const char* p : {"/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return {};
}

std::vector<std::string> worker_writable_paths(const WorkerSpec& spec) {
  std::vector<std::string> paths;
  if (spec.sandbox.enabled()) {
    // All private to the sandbox: its tmpfs /tmp and /dev/shm, its /dev (null, zero, ...; a GPU's
    // nodes, which need write access to be opened and their ioctls), the box's out/.
    paths = {"/tmp", "/dev/shm", "/dev"};
    if (!spec.sandbox.box.empty()) paths.push_back((spec.sandbox.box / "out").string());
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
  const std::string uid = std::to_string(s.uid);
  std::vector<std::string> a = {s.bwrap.string(),
                                "--unshare-user",
                                "--unshare-pid",
                                "--unshare-net",
                                "--unshare-ipc",
                                "--unshare-uts",
                                "--unshare-cgroup-try",
                                "--uid",
                                uid,
                                "--gid",
                                uid,
                                "--hostname",
                                "fib-worker",
                                "--proc",
                                "/proc",
                                "--dev",
                                "/dev",
                                "--tmpfs",
                                "/tmp",
                                "--tmpfs",
                                "/dev/shm"};
  // The worker's whole process tree dies with it: bubblewrap's init (pid 1 of the namespace)
  // dies with the process fib started, and with it every process of the namespace, including
  // any that called setsid(). A new terminal session keeps the solution off fib's terminal, so
  // it cannot inject input there with TIOCSTI.
  a.insert(a.end(), {"--die-with-parent", "--new-session"});
  add_root_links(a);
  // Read-only, as the worker needs it: the cache sizes the CPU timer's flush is sized by, the
  // CPUs OpenMP and torch count, the PCI and NUMA description NVML and CUDA read.
  if (std::error_code ec; fs::exists("/sys", ec)) a.insert(a.end(), {"--ro-bind", "/sys", "/sys"});
  for (const fs::path& p : s.read_only) a.insert(a.end(), {"--ro-bind", p.string(), p.string()});
  if (!s.box.empty()) {
    const std::string out = (s.box / "out").string();
    a.insert(a.end(), {"--ro-bind", s.box.string(), s.box.string(), "--bind", out, out});
  }
  if (s.gpu) add_gpu_devices(a);
  a.insert(a.end(), {"--chdir", "/tmp", "--"});
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

}  // namespace fib::bench
