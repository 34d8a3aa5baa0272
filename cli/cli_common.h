// Small helpers the subcommands share: loading a dataset and finding a definition or workload
// by name with a "did you mean" when it is not there.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"

namespace fib::cli {

// The dataset from --dataset, or $FIB_DATASET_PATH; throws fib::Error when neither is given.
std::string dataset_path(const std::string& flag);
const Definition& find_definition(const TraceSet& set, const std::string& name);
const Workload& find_workload(const TraceSet& set, const Definition& def, const std::string& uuid);
// --dataset DIR (with upstream's --local as an alias), one folder or several.
void add_dataset_option(CLI::App* cmd, std::string& dataset);
void add_dataset_option(CLI::App* cmd, std::vector<std::string>& datasets, const std::string& more);
// --sandbox auto|required|off, as `fib run` and `fib serve` take it.
void add_sandbox_option(CLI::App* cmd, bench::SandboxMode& mode, const std::string& help);
// The executable `fib run` starts its workers from: the stripped fib-worker beside this binary
// where it is installed, else this binary (`fib worker`).
std::filesystem::path worker_executable();

}  // namespace fib::cli
