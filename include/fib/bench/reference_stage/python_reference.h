// A definition's own PyTorch `reference` run by python/fib_bridge/run_reference.py in a child
// process: fib writes each call's inputs as a safetensors file, the bridge (one process, torch
// imported once, for many calls) writes the outputs as safetensors, and fib reads them back.
// `fib run` uses it for definitions without a native reference (and with --reference python),
// `fib reference check` to hold the native references against the PyTorch ones.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/launch/worker_process.h"
#include "fib/reference/reference.h"
#include "fib/trace/definition.h"

namespace fib::bench {

// One call of a definition's reference.
struct PythonReferenceJob {
  const Definition* def = nullptr;
  reference::Arguments args;
  std::filesystem::path outputs;  // the safetensors file the bridge writes
  std::uint64_t seed = 0;         // torch.manual_seed before the call (sampling references)
  int repeat = 0;                 // timed calls after the one whose outputs are saved
};

struct PythonReferenceResult {
  bool ok = false;
  std::string error;            // the Python traceback, or why the process failed
  std::vector<double> runs_ms;  // repeat > 0: wall-clock milliseconds of each timed call
  std::string device;           // repeat > 0: where its outputs were computed ("cpu", "cuda:0")
};

struct PythonReferenceSettings {
  PythonRuntime python;
  std::filesystem::path bridge_dir;  // holds run_reference.py
  std::filesystem::path work_dir;    // the jobs' inputs and the batch file go here
  std::string device = "cpu";        // "cpu" or "cuda:N"
  unsigned threads = 0;              // torch.set_num_threads; 0: torch's default
  std::chrono::steady_clock::time_point deadline;
  // Enabled: the bridge runs in this sandbox (a definition's `reference` is code from the
  // dataset); its files go in the sandbox's box instead of work_dir, its outputs in the box's
  // out/ folder, from where they are moved to the jobs' paths.
  SandboxSpec sandbox;
};

// Runs every job in one bridge process (torch is imported once); a result per job, in order.
std::vector<PythonReferenceResult> run_python_references(
    const PythonReferenceSettings& settings, const std::vector<PythonReferenceJob>& jobs);

// A job's outputs as the definition declares them: each output the definition names, converted
// to its declared dtype where the reference returned another (a note in `notes` says so).
// Throws fib::Error when an output is missing.
reference::Outputs read_python_outputs(const Definition& def, const std::filesystem::path& file,
                                       std::vector<std::string>* notes = nullptr);

// Where run_reference.py lives: $FIB_PYTHON_BRIDGE_DIR, else `built_in` (the source tree's
// python/fib_bridge). Throws fib::Error when the script is not there.
std::filesystem::path python_bridge_dir(const std::filesystem::path& built_in);

}  // namespace fib::bench
