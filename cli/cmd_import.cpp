// fib import: FlashInfer's dumps into dataset records. `flashinfer-defs DIR`: definition dumps
// (FLASHINFER_TRACE_DUMP_DIR); `flashinfer-calls DIR`: level-10 API logging dumps
// (FLASHINFER_DUMP_DIR). Exit 1 when any dump file was refused (the others are still imported).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "fib/base/diagnostics.h"
#include "fib/import/import.h"

namespace fib::cli {

namespace {

struct ImportArgs {
  std::string dumps;
  std::string dataset;
  std::string tags;
  std::size_t max_per_definition = 8;
  std::string python = "/usr/bin/python3";
};

int finish(const import::Report& report) {
  std::cout << import::render_text(report);
  return report.has_errors() ? kExitFindings : kExitOk;
}

int run_definitions(const ImportArgs& a) {
  try {
    const import::DefinitionImportOptions options{.tags = import::parse_workflow_tags(a.tags)};
    return finish(import::import_definitions(a.dumps, a.dataset, options));
  } catch (const Error& e) {
    std::cerr << "fib import flashinfer-defs: " << e.what() << "\n";
    return kExitUsage;
  }
}

int run_calls(const ImportArgs& a) {
  try {
    import::WorkloadImportOptions options;
    options.max_per_definition = a.max_per_definition;
    options.python = a.python;
    return finish(import::import_workloads(a.dumps, a.dataset, options));
  } catch (const Error& e) {
    std::cerr << "fib import flashinfer-calls: " << e.what() << "\n";
    return kExitUsage;
  }
}

CLI::App* add_common(CLI::App* cmd, ImportArgs& a, const char* what) {
  cmd->add_option("DIR", a.dumps, what)->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--dataset", a.dataset, "The dataset the records go into (created when absent)")
      ->required();
  return cmd;
}

}  // namespace

void register_import(CLI::App& app, Runner& run) {
  CLI::App* import_cmd = app.add_subcommand("import", "Import FlashInfer's dumps into a dataset");
  import_cmd->require_subcommand(1);

  auto defs = std::make_shared<ImportArgs>();
  CLI::App* d = add_common(
      import_cmd->add_subcommand("flashinfer-defs",
                                 "Definition dumps (FLASHINFER_TRACE_DUMP=1) into definitions"),
      *defs, "FLASHINFER_TRACE_DUMP_DIR (one JSON per op and shape)");
  d->add_option("--tags", defs->tags, "Workflow tags to add, e.g. model:llama-3.1-8b,tp:8,ep:1");
  d->callback([&run, defs] { run = [defs] { return run_definitions(*defs); }; });

  auto calls = std::make_shared<ImportArgs>();
  CLI::App* c = add_common(
      import_cmd->add_subcommand("flashinfer-calls",
                                 "Level-10 API logging dumps (FLASHINFER_LOGLEVEL=10) into "
                                 "workloads of the dataset's definitions"),
      *calls, "FLASHINFER_DUMP_DIR (one folder per call)");
  c->add_option("--max-per-definition", calls->max_per_definition,
                "Workloads of distinct axes kept per definition")
      ->check(CLI::PositiveNumber);
  c->add_option("--python", calls->python,
                "The Python with torch that reads .pt dumps (weights only, in bubblewrap)");
  c->callback([&run, calls] { run = [calls] { return run_calls(*calls); }; });
}

}  // namespace fib::cli
