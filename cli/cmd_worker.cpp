// fib worker: the child process `fib run` starts to run solutions (or native references) in;
// not for direct use (hidden from --help). `fib run` starts the stripped `fib-worker` beside it
// where it is installed (cli/worker/), which takes the same arguments.
#include "cli/commands.h"
#include "fib/bench/worker/worker_main.h"

namespace fib::cli {

void register_worker(CLI::App& app, Runner& run) {
  auto fd = std::make_shared<int>(-1);
  auto writable = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("worker", "Internal: a fib run worker process");
  cmd->group("");  // hidden
  cmd->add_option("--channel", *fd, "The descriptor of the channel to the orchestrator")
      ->required();
  cmd->add_option("--writable", *writable, "A folder or file the worker may write (Landlock)");
  cmd->callback([&run, fd, writable] {
    run = [fd, writable] {
      bench::WorkerHardening hardening;
      hardening.writable = *writable;
      return bench::worker_main(*fd, hardening);
    };
  });
}

}  // namespace fib::cli
