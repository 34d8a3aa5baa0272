// The fib subcommands. Each lives in its own file (cmd_<name>.cpp), parses its flags with
// CLI11 and calls into the modules; none holds logic of its own.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace fib::cli {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;  // the command ran and found errors (validate, run)
inline constexpr int kExitUsage = 2;     // bad flags or unusable input

// Registers a subcommand; `run` is set to the function main() calls when it is chosen.
using Runner = std::function<int()>;
void register_validate(CLI::App& app, Runner& run);
void register_validate_render(CLI::App& app, Runner& run);
void register_report(CLI::App& app, Runner& run);
void register_onboard(CLI::App& app, Runner& run);
void register_models(CLI::App& app, Runner& run);
void register_inputs(CLI::App& app, Runner& run);
void register_reference(CLI::App& app, Runner& run);
// `fib reference check`, under the `reference` command.
void register_reference_check(CLI::App& reference, Runner& run);
void register_workloads(CLI::App& app, Runner& run);
void register_run(CLI::App& app, Runner& run);
void register_worker(CLI::App& app, Runner& run);
void register_solution(CLI::App& app, Runner& run);
void register_key(CLI::App& app, Runner& run);
void register_serve(CLI::App& app, Runner& run);
void register_trace(CLI::App& app, Runner& run);
// `fib apply table|export`: the solutions to substitute in an engine (docs/apply.md).
void register_apply(CLI::App& app, Runner& run);
// `fib import flashinfer-defs|flashinfer-calls`: FlashInfer's dumps into dataset records.
void register_import(CLI::App& app, Runner& run);
// `fib mcp`: the MCP server on stdio.
void register_mcp(CLI::App& app, Runner& run);
// `fib completion bash|zsh`: reads the whole tree of `app`, so it is registered last.
void register_completion(CLI::App& app, Runner& run);

}  // namespace fib::cli
