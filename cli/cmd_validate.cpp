// fib validate: check a dataset's layout, schemas and cross-references; exit 1 on any error.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/base/json.h"
#include "fib/dataset/files.h"
#include "fib/dataset/trace_set.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/suggest.h"
#include "fib/validate/validator.h"

namespace fib::cli {

namespace {

struct ValidateArgs {
  std::string dataset;
  std::vector<std::string> checks;
  std::vector<std::string> op_types;
  std::vector<std::string> definitions;
  std::string output_folder;
  std::vector<std::string> outputs;
  std::string baseline_author = "baseline";
  bool no_blobs = false;
  bool all = false;
};

std::vector<std::string> split_commas(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    std::size_t start = 0;
    while (start <= item.size()) {
      const std::size_t end = std::min(item.find(',', start), item.size());
      if (end > start) out.push_back(item.substr(start, end - start));
      start = end + 1;
    }
  }
  return out;
}

int run_validate(const ValidateArgs& a) {
  std::string dataset = a.dataset;
  if (dataset.empty()) {
    if (const char* env = std::getenv("FIB_DATASET_PATH"); env && *env) dataset = env;
  }
  if (dataset.empty()) {
    std::cerr << "fib validate: no dataset given (use --dataset DIR or set FIB_DATASET_PATH)\n";
    return kExitUsage;
  }
  validate::Options opt;
  opt.checks.clear();
  for (const auto& c : split_commas(a.checks)) {
    auto parsed = validate::parse_check(c);
    if (!parsed) {
      std::vector<std::string_view> names;
      for (auto k : validate::kAllChecks) names.push_back(validate::check_name(k));
      std::cerr << fmt::format("fib validate: unknown check '{}' ({})\n", c, suggest(c, names));
      return kExitUsage;
    }
    opt.checks.push_back(*parsed);
  }
  if (opt.checks.empty())
    opt.checks.assign(validate::kAllChecks.begin(), validate::kAllChecks.end());
  opt.op_types = split_commas(a.op_types);
  opt.definitions = split_commas(a.definitions);
  opt.baseline_author = a.baseline_author;
  opt.read_blobs = !a.no_blobs;

  std::vector<std::string> outputs = split_commas(a.outputs);
  if (outputs.empty()) {
    outputs = a.output_folder.empty() ? std::vector<std::string>{"stdout"}
                                      : std::vector<std::string>{"stdout", "json", "text"};
  }
  bool to_stdout = false, to_json = false, to_text = false;
  for (const auto& o : outputs) {
    if (o == "stdout")
      to_stdout = true;
    else if (o == "json")
      to_json = true;
    else if (o == "text")
      to_text = true;
    else {
      static constexpr std::string_view kOutputs[] = {"stdout", "json", "text"};
      std::cerr << fmt::format("fib validate: unknown output '{}' ({})\n", o, suggest(o, kOutputs));
      return kExitUsage;
    }
  }

  const TraceSet set = TraceSet::load(dataset);
  const validate::Report report = validate::validate_dataset(set, opt);
  for (const auto& name : opt.definitions) {
    if (!set.definition(name)) {
      std::vector<std::string> names;
      for (const auto& d : set.definitions()) names.push_back(d.value.name);
      std::cerr << fmt::format("fib validate: warning: no definition named '{}' ({})\n", name,
                               suggest(name, names));
    }
  }
  const std::string text = validate::render_text(report);
  if (to_stdout) std::cout << text;
  if (to_json || to_text) {
    const std::filesystem::path folder = a.output_folder.empty()
                                             ? std::filesystem::path(dataset) / "reports"
                                             : std::filesystem::path(a.output_folder);
    const std::string stamp = fmt::format("{:%Y%m%d-%H%M%S}", fmt::localtime(std::time(nullptr)));
    if (to_json) {
      const auto p = folder / fmt::format("report-{}.json", stamp);
      write_file_atomic(p, dump_json_pretty(validate::report_to_json(report)));
      std::cerr << fmt::format("fib validate: wrote {}\n", p.string());
    }
    if (to_text) {
      const auto p = folder / fmt::format("report-{}.txt", stamp);
      write_file_atomic(p, text);
      std::cerr << fmt::format("fib validate: wrote {}\n", p.string());
    }
  }
  return report.has_errors() ? kExitFindings : kExitOk;
}

}  // namespace

void register_validate(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* cmd =
      app.add_subcommand("validate", "Check a dataset's layout, schemas and cross-references");
  add_dataset_option(cmd, args->dataset);
  cmd->add_option("--checks", args->checks,
                  "Checks to run: layout,definition,workload,solution,trace,baseline")
      ->delimiter(',');
  cmd->add_option("--op-types", args->op_types, "Only report definitions of these op types")
      ->delimiter(',');
  cmd->add_option("--definitions", args->definitions,
                  "Only report these definitions (union with --op-types)")
      ->delimiter(',');
  cmd->add_option(
      "--output-folder", args->output_folder,
      "Where report-<time>.json/.txt go (default: <dataset>/reports when json/text is asked for)");
  cmd->add_option("--outputs", args->outputs,
                  "Any of stdout,json,text (default: stdout; all three with --output-folder)")
      ->delimiter(',');
  cmd->add_option("--baseline-author", args->baseline_author,
                  "Author whose solutions are the baseline");
  cmd->add_flag("--no-blobs", args->no_blobs,
                "Do not open safetensors blobs (faster; skips content checks)");
  cmd->callback([&run, args] { run = [args] { return run_validate(*args); }; });
}

void register_validate_render(CLI::App& app, Runner& run) {
  auto report_path = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("validate-render", "Render a saved validation report (JSON) as text");
  cmd->add_option("report", *report_path, "report-<time>.json written by fib validate")->required();
  cmd->add_option("--output", *output, "Write the text here instead of stdout");
  cmd->callback([&run, report_path, output] {
    run = [report_path, output] {
      Diagnostics diag;
      auto j = read_json_file(*report_path, diag);
      std::optional<validate::Report> r;
      if (j) {
        ReadContext ctx{*report_path, &diag};
        r = validate::report_from_json(*j, ctx);
      }
      if (!r) {
        std::cerr << diag.to_string();
        return kExitUsage;
      }
      const std::string text = validate::render_text(*r);
      if (output->empty()) {
        std::cout << text;
      } else {
        write_file_atomic(*output, text);
      }
      return r->has_errors() ? kExitFindings : kExitOk;
    };
  });
}

}  // namespace fib::cli
