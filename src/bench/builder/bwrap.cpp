// The pieces of a bubblewrap command line both of fib's sandboxes share
// (fib/bench/builder/bwrap.h).
#include "fib/bench/builder/bwrap.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace fib::bench {

namespace fs = std::filesystem;

namespace {

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

}  // namespace

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

bool path_under(const fs::path& p, const fs::path& dir) {
  const std::string s = p.string(), d = dir.string();
  return s == d || (s.size() > d.size() && s.compare(0, d.size(), d) == 0 && s[d.size()] == '/');
}

std::vector<std::string> bwrap_base_arguments(const fs::path& bwrap, unsigned uid,
                                              const std::string& hostname) {
  const std::string id = std::to_string(uid);
  std::vector<std::string> a = {bwrap.string(),
                                "--unshare-user",
                                "--unshare-pid",
                                "--unshare-net",
                                "--unshare-ipc",
                                "--unshare-uts",
                                "--unshare-cgroup-try",
                                "--uid",
                                id,
                                "--gid",
                                id,
                                "--hostname",
                                hostname,
                                "--proc",
                                "/proc",
                                "--dev",
                                "/dev",
                                "--tmpfs",
                                "/tmp",
                                "--tmpfs",
                                "/dev/shm"};
  // The whole process tree dies with it: bubblewrap's init (pid 1 of the namespace) dies with
  // the process fib started, and with it every process of the namespace, including any that
  // called setsid(). A new terminal session keeps it off fib's terminal, so it cannot inject
  // input there with TIOCSTI.
  a.insert(a.end(), {"--die-with-parent", "--new-session"});
  add_root_links(a);
  return a;
}

std::vector<fs::path> distinct_existing_paths(const std::vector<fs::path>& paths) {
  std::vector<fs::path> kept;
  std::error_code ec;
  for (const fs::path& p : paths) {
    if (p.empty() || !fs::exists(p, ec)) continue;
    const bool covered =
        std::any_of(kept.begin(), kept.end(), [&](const fs::path& k) { return path_under(p, k); });
    if (!covered) kept.push_back(p);
  }
  return kept;
}

}  // namespace fib::bench
