// How a run isolates its workers (`--sandbox`): bubblewrap where it can be made, with a box per
// lane and worker (the only folder a worker can write; fib/bench/launch/box.h stages an
// evaluation's files in it and takes the outputs back out). The reference worker and the PyTorch
// reference run in the same sandbox, each with a box of its own.
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

}  // namespace fib::bench::detail
