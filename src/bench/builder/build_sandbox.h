// A build's commands as they run in the build sandbox (fib/bench/builder/build.h, BuildSandbox).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fib/bench/builder/build.h"

namespace fib::bench::detail {

// The absolute paths a command line names: arguments that are paths, and the paths inside
// -I/-L/-isystem/-ccbin style arguments and comma or '=' lists (-Wl,-rpath,<dir>).
std::vector<std::filesystem::path> paths_named_in(const std::vector<std::string>& args);

// The folders a toolchain's compilers and flags need: each compiler's program (as found and
// resolved) and every path its flags name.
std::vector<std::filesystem::path> toolchain_paths(const Toolchain& tc);

// `argv` run in `sandbox`, in `cwd`, with `build_dir` the one folder it can write and
// `toolchain` (with /usr, the loader's cache and the sandbox's own read_only) all it can read
// besides; a scrubbed environment (PATH, HOME and TMPDIR in its private /tmp, the locale, and
// the CUDA and torch variables compilers read).
std::vector<std::string> sandboxed_build_command(
    const BuildSandbox& sandbox, const std::vector<std::filesystem::path>& toolchain,
    const std::filesystem::path& build_dir, const std::filesystem::path& cwd,
    const std::vector<std::string>& argv);

// A build log as the submitter gets it: its first and last 32 KiB (as a worker's output is kept),
// with a line saying how much was left out between them.
std::string head_and_tail(const std::string& log);

// The line a build log starts with: where its compilers ran.
std::string build_sandbox_note(const BuildSandbox& sandbox);

}  // namespace fib::bench::detail
