// How a run isolates its workers (`--sandbox`): bubblewrap where it can be made, with a box per
// lane and worker (the only folder a worker can write), and the files an evaluation stages in the
// box and takes back out of it. The reference worker and the PyTorch reference run in the same
// sandbox, each with a box of its own.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "environment.h"
#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/launch/worker_process.h"
#include "fib/bench/run/run.h"
#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

struct SandboxChoice {
  SandboxSpec spec;  // bwrap empty: unsandboxed; the box is set per lane
  Json isolation;    // what every trace records (environment.extra.isolation)
};

// Probes the sandbox (a worker started in it must answer) and chooses: --sandbox required
// throws fib::Error when it cannot be made; auto warns loudly through `warn` and runs
// unsandboxed; off runs unsandboxed.
SandboxChoice choose_sandbox(const RunOptions& o, bool gpu, const Scratch& scratch,
                             const std::function<void(const std::string&)>& warn);

// The worker's view of an evaluation's files: the input-set file and the solution library
// staged in its box (linked, or copied across file systems), readable by the sandbox's uid.
struct StagedFiles {
  std::string inputs, library;
};
// Stages them, and clears the box of everything else (its out/ folder of what a worker left
// there for a later one). The box is bound read-only: a worker cannot replace what is staged.
// `whole_folder`: the library's whole folder comes along (a Python solution's build entry).
StagedFiles stage_in_box(const std::filesystem::path& box, const std::string& inputs_file,
                         const std::filesystem::path& library, const std::string& build_key,
                         bool whole_folder);
// What a sandboxed process must see of a python3 to run it (under /usr on Debian, anywhere
// for a conda, pyenv or venv python): its executable, its base prefixes, its sys.path and its
// libpython's folder.
std::vector<std::filesystem::path> python_paths(const PythonRuntime& python);

// The reference worker's box: the input-set file staged alone (everything else cleared).
std::string stage_inputs_in_box(const std::filesystem::path& box, const std::string& inputs_file);
// Moves the files the worker wrote in its box to where the orchestrator judges them, out of the
// worker's reach; a file the worker did not write is left out.
void take_from_box(const std::vector<std::string>& in_box, const std::vector<std::string>& to);

}  // namespace fib::bench::detail
