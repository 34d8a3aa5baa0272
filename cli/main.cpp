// fib: a native FlashInfer-Bench. Dispatches to one subcommand per file in this folder.
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "fib/base/diagnostics.h"
#include "fib/version.h"

int main(int argc, char** argv) {
  CLI::App app{
      "fib: define, validate, run and report GPU kernel benchmarks in the FlashInfer-Trace format"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(fib::kVersion));
  fib::cli::Runner run;
  fib::cli::register_validate(app, run);
  fib::cli::register_validate_render(app, run);
  fib::cli::register_report(app, run);
  fib::cli::register_onboard(app, run);
  fib::cli::register_models(app, run);
  fib::cli::register_inputs(app, run);
  fib::cli::register_reference(app, run);
  fib::cli::register_workloads(app, run);
  fib::cli::register_solution(app, run);
  fib::cli::register_run(app, run);
  fib::cli::register_key(app, run);
#ifdef FIB_HAVE_SERVE
  fib::cli::register_serve(app, run);
#endif
  fib::cli::register_worker(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : fib::cli::kExitUsage;
  }
  try {
    return run ? run() : fib::cli::kExitUsage;
  } catch (const fib::Error& e) {
    std::cerr << fmt::format("fib: {}\n", e.what());
    return fib::cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("fib: internal error: {}\n", e.what());
    return 3;
  }
}
