// fib worker: the child process `fib run` starts to run solutions (or native references) in;
// not for direct use (hidden from --help).
#include "cli/commands.h"
#include "fib/bench/worker/worker_main.h"

namespace fib::cli {

void register_worker(CLI::App& app, Runner& run) {
  auto fd = std::make_shared<int>(-1);
  CLI::App* cmd = app.add_subcommand("worker", "Internal: a fib run worker process");
  cmd->group("");  // hidden
  cmd->add_option("--channel", *fd, "The descriptor of the channel to the orchestrator")
      ->required();
  cmd->callback([&run, fd] { run = [fd] { return bench::worker_main(*fd); }; });
}

}  // namespace fib::cli
