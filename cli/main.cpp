// fib: a native FlashInfer-Bench. Dispatches to one subcommand per file in this folder.
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "fib/base/diagnostics.h"
#include "fib/trace/suggest.h"
#include "fib/version.h"

namespace {
// CLI11 reports an unknown first word as "A subcommand is required"; name it instead, with the
// closest command.
bool unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
    if (names.back() == argv[1]) return false;
  }
  std::cerr << fmt::format("fib: unknown command '{}' ({}); `fib --help` lists the commands\n",
                           argv[1], fib::suggest(argv[1], names));
  return true;
}
}  // namespace

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
  fib::cli::register_trace(app, run);
  fib::cli::register_apply(app, run);
  fib::cli::register_import(app, run);
  fib::cli::register_mcp(app, run);
#ifdef FIB_HAVE_SERVE
  fib::cli::register_serve(app, run);
#endif
  fib::cli::register_worker(app, run);
  fib::cli::register_completion(app, run);
  if (unknown_command(app, argc, argv)) return fib::cli::kExitUsage;
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
