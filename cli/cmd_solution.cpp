// fib solution pack: its flags and its report; the packing itself is the dataset's
// (fib/dataset/solution_pack.h).
#include <fmt/format.h>

#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/dataset/solution_pack.h"

namespace fib::cli {

namespace {

struct PackArgs {
  std::string dataset, output, description;
  bool has_description = false;
  SolutionPackRequest request;
};

int run_pack(const PackArgs& a) {
  SolutionPackRequest request = a.request;
  if (a.has_description) request.description = a.description;
  const Solution s = pack_solution(request);
  TraceSet set = TraceSet::load(dataset_path(a.dataset));
  const Definition& def = find_definition(set, s.definition);
  Diagnostics findings;
  const auto stored = store_packed_solution(set, def, s, a.output, findings);
  if (!stored) {
    std::cerr << fmt::format("fib solution pack: the packed solution is not valid:\n{}",
                             findings.to_string());
    return kExitFindings;
  }
  std::string names;
  for (const auto& src : s.sources) names += (names.empty() ? "" : ", ") + src.path;
  std::cout << fmt::format("{} {}: solution '{}' of {} by {} ({} source{}: {}; entry {}; {})\n",
                           stored->replaced ? "replaced" : "wrote", stored->path, s.name,
                           s.definition, s.author, s.sources.size(),
                           s.sources.size() == 1 ? "" : "s", names, s.spec.entry_point,
                           s.spec.dps() ? "destination-passing" : "value-returning");
  return kExitOk;
}

}  // namespace

void register_solution(CLI::App& app, Runner& run) {
  auto a = std::make_shared<PackArgs>();
  CLI::App* cmd = app.add_subcommand("solution", "Work with a dataset's solutions");
  cmd->require_subcommand(1);
  CLI::App* pack = cmd->add_subcommand(
      "pack", "Pack source files into a solution of a definition and write it into the dataset");
  add_dataset_option(pack, a->dataset);
  pack->add_option("--definition", a->request.definition, "The definition the solution implements")
      ->required();
  pack->add_option("--name", a->request.name, "Solution name (unique within the dataset)")
      ->required();
  pack->add_option("--author", a->request.author, "Author (the folder under solutions/)")
      ->required();
  pack->add_option("--entry", a->request.entry,
                   "Entry point FILE::SYMBOL; FILE is one of the sources (as stored, or its path)")
      ->required();
  pack->add_option("--language", a->request.language,
                   "python, triton, cpp (default), cuda or tilelang");
  pack->add_option("--binding", a->request.binding,
                   "tvm-ffi (written by default for cpp and cuda), torch, or fib (fib's own ABI, "
                   "include/fib/solution.h; a fib extension upstream does not accept)");
  pack->add_option("--target-hardware", a->request.target_hardware,
                   "Where it runs, comma-separated (default: cpu for cpp, cuda for cuda, triton "
                   "and tilelang; python needs it)")
      ->delimiter(',');
  pack->add_flag("--value-returning", a->request.value_returning,
                 "The entry returns its outputs (destination_passing_style false); default: it "
                 "writes outputs the harness allocates");
  pack->add_option("--description", a->description, "Description of the solution")
      ->each([a](const std::string&) { a->has_description = true; });
  pack->add_option("--output", a->output,
                   "Write the solution JSON to this file instead of "
                   "solutions/<author>/<op_type>/<definition>/<name>.json in the dataset");
  pack->add_option("sources", a->request.sources, "Source files")->required();
  pack->footer(
      "Sources are stored relative to the deepest folder holding all of them (their file names "
      "when they share one folder). The definition must exist in the dataset; its op_type picks "
      "the folder. Files are written atomically; packing again replaces the file.\n"
      "Exit status: 0 written, 1 the packed record does not read back as a valid solution, 2 bad "
      "flags or unusable input (nothing is written).");
  pack->callback([&run, a] { run = [a] { return run_pack(*a); }; });
}

}  // namespace fib::cli
