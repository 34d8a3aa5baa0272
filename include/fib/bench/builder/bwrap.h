// Bubblewrap, as both sandboxes fib makes use it: the workers' (fib/bench/launch/worker_process.h)
// and the compilers' (a solution's build, fib/bench/builder/build.h). Each process gets its own
// user, pid, network, IPC, UTS (and, where the kernel allows, cgroup) namespaces, a private
// /proc, /dev, /tmp and /dev/shm, a session of its own (no terminal to push input into), and dies
// with the process fib started; what it sees of the file system beyond that is each sandbox's own
// choice.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace fib::bench {

// Bubblewrap: the binary $FIB_BWRAP names where it is set, else /usr/bin/bwrap; empty when there
// is none.
std::filesystem::path find_bwrap();

// Whether `p` is `dir` or lies under it (by their text: both absolute and normal).
bool path_under(const std::filesystem::path& p, const std::filesystem::path& dir);

// `bwrap` and the arguments every fib sandbox starts with: the namespaces (uid and gid `uid`
// inside, host name `hostname`), private /proc, /dev, /tmp and /dev/shm, --die-with-parent,
// --new-session (a session of its own), and /bin, /lib, ... as on the host (links into /usr, or
// bound read-only).
std::vector<std::string> bwrap_base_arguments(const std::filesystem::path& bwrap, unsigned uid,
                                              const std::string& hostname);

// `paths` without those that do not exist or lie under another one of them.
std::vector<std::filesystem::path> distinct_existing_paths(
    const std::vector<std::filesystem::path>& paths);

}  // namespace fib::bench
