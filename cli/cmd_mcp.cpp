// fib mcp: the MCP server for agent frameworks, on stdin and stdout (docs/mcp.md). Diagnostics
// go to stderr: stdout carries only protocol messages.
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/agent/mcp.h"

namespace fib::cli {

namespace {

struct McpArgs {
  std::string dataset;
  agent::McpOptions options;
  std::optional<int> warmup, iterations, trials;
  std::optional<std::string> config;
  std::string reference = "auto";
  std::uint64_t memory_limit_mb = 0;
};

std::filesystem::path abi_include_dir() {
  if (const char* env = std::getenv("FIB_INCLUDE_DIR")) return env;
  return FIB_ABI_INCLUDE_DIR;
}

int mcp_cmd(McpArgs& a) {
  agent::McpOptions& m = a.options;
  m.dataset = dataset_path(a.dataset);
  bench::RunOptions& o = m.run;
  o.cli.warmup_runs = a.warmup;
  o.cli.iterations = a.iterations;
  o.cli.num_trials = a.trials;
  if (a.config) o.config = *a.config;
  o.reference = bench::parse_reference_choice(a.reference);
  o.memory_limit_bytes = a.memory_limit_mb << 20;
  o.worker_executable = worker_executable();
  o.abi_include_dir = abi_include_dir();
  if (!std::filesystem::exists(o.abi_include_dir / "fib" / "solution.h")) {
    throw Error("fib/solution.h", "cannot find the solution ABI header",
                "set FIB_INCLUDE_DIR to the folder holding fib/solution.h (fib's include/)");
  }
  o.python_bridge_dir = FIB_PYTHON_BRIDGE_DIR;
  const std::string dataset = m.dataset.string();
  agent::McpServer server(std::move(m));
  std::cerr << fmt::format("fib mcp: serving {} over stdio (MCP {})\n", dataset,
                           agent::kMcpProtocolVersion);
  std::ios::sync_with_stdio(false);
  server.serve(std::cin, std::cout);
  return kExitOk;
}

}  // namespace

void register_mcp(CLI::App& app, Runner& run) {
  auto a = std::make_shared<McpArgs>();
  CLI::App* cmd = app.add_subcommand(
      "mcp", "Serve a dataset to agent frameworks as an MCP server on stdio (docs/mcp.md)");
  add_dataset_option(cmd, a->dataset);
  cmd->add_option("--device", a->options.run.device,
                  "Where evaluate runs solutions: cpu (default) or cuda:N");
  add_sandbox_option(cmd, a->options.run.sandbox,
                     "Workers in a bubblewrap sandbox: auto (default), required or off");
  cmd->add_option("--build-cache", a->options.run.build_cache,
                  "Build cache folder (default $FIB_CACHE_DIR or ~/.cache/fib/build)");
  cmd->add_option("--timeout", a->options.run.timeout_seconds,
                  "Per (solution, workload) evaluation, in seconds (default 300)");
  cmd->add_option("--warmup-runs", a->warmup, "Untimed calls before timing");
  cmd->add_option("--iterations", a->iterations, "Timed calls per trial");
  cmd->add_option("--num-trials", a->trials, "Checked trials, each with fresh inputs");
  cmd->add_option("--config", a->config, "Eval config YAML (upstream's format)");
  cmd->add_option("--reference", a->reference, "auto (default), native or python");
  cmd->add_option("--memory-limit-mb", a->memory_limit_mb,
                  "Address-space limit per worker (default: half of the RAM)");
  cmd->callback([&run, a] { run = [a] { return mcp_cmd(*a); }; });
}

}  // namespace fib::cli
