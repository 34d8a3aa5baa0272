// fib reference check: the native references of the chosen definitions against their own PyTorch
// references on the same synthesized inputs, as a table
// (fib/bench/reference_stage/reference_check.h).
#include <fmt/format.h>
#include <unistd.h>

#include <iostream>
#include <set>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/bench/reference_stage/reference_check.h"
#include "fib/dataset/trace_set.h"
#include "fib/trace/suggest.h"

namespace fib::cli {

namespace {

struct CheckArgs {
  std::string dataset;
  std::vector<std::string> definitions, op_types;
  bool all = false, json = false;
  std::uint64_t max_input_mb = 512;
  bench::ReferenceCheckOptions options;
};

std::vector<const Definition*> chosen_definitions(const TraceSet& set, const CheckArgs& a) {
  if (!a.all && a.definitions.empty() && a.op_types.empty()) {
    throw Error("fib reference check", "no definitions chosen",
                "name them with --definition NAME (repeatable), --op-type T or --all");
  }
  const std::vector<std::string> ops = set.op_types();
  for (const auto& op : a.op_types) {
    if (std::find(ops.begin(), ops.end(), op) == ops.end()) {
      throw Error("--op-type", fmt::format("the dataset has no definition of op type '{}'", op),
                  suggest(op, ops));
    }
  }
  std::set<std::string> named;
  for (const auto& n : a.definitions) named.insert(find_definition(set, n).name);
  std::vector<const Definition*> defs;
  for (const auto& d : set.definitions()) {
    const Definition& def = d.value;
    const bool by_op =
        std::find(a.op_types.begin(), a.op_types.end(), def.op_type) != a.op_types.end();
    if (a.all || by_op || named.count(def.name)) defs.push_back(&def);
  }
  return defs;
}

int run_check(CheckArgs& a) {
  const TraceSet set = TraceSet::load(dataset_path(a.dataset));
  const std::vector<const Definition*> defs = chosen_definitions(set, a);
  bench::ReferenceCheckOptions& o = a.options;
  o.dataset_root = set.root();
  o.max_input_bytes = a.max_input_mb << 20;
  o.python_bridge_dir = FIB_PYTHON_BRIDGE_DIR;
  std::size_t done = 0;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const auto progress = [&](const bench::ReferenceCheckRow& r) {
    if (a.json) return;
    ++done;
    std::cerr << fmt::format("{}[{}/{}] {}: {}{}", tty ? "\r\033[K" : "", done, defs.size(),
                             r.definition, bench::check_verdict_name(r.verdict),
                             tty && done < defs.size() ? "" : "\n");
  };
  const bench::ReferenceCheckResult r = bench::check_references(set, defs, o, progress);
  if (a.json) {
    std::cout << bench::to_json(r).dump(2) << "\n";
  } else {
    std::cout << bench::render_reference_check(r);
  }
  return r.all_agree() ? kExitOk : kExitFindings;
}

}  // namespace

void register_reference_check(CLI::App& reference, Runner& run) {
  auto a = std::make_shared<CheckArgs>();
  CLI::App* cmd = reference.add_subcommand(
      "check",
      "Check native references against the definitions' PyTorch references on synthesized inputs");
  add_dataset_option(cmd, a->dataset);
  cmd->add_option("--definition", a->definitions, "A definition to check (repeatable)");
  cmd->add_option("--op-type", a->op_types, "Every definition of this op type (repeatable)");
  cmd->add_flag("--all", a->all, "Every definition of the dataset");
  cmd->add_option("--seed", a->options.seed, "Seed of the inputs (default 0)");
  cmd->add_option("--device", a->options.device,
                  "cpu (default), or cuda:N: the CUDA native reference against torch on GPU N");
  cmd->add_option("--python", a->options.python,
                  "Python with PyTorch (default: $FIB_PYTHON, else the first python3 that "
                  "imports torch)");
  cmd->add_option("--max-workloads", a->options.max_workloads,
                  "At most this many workloads per definition, the smallest first (default: all)");
  cmd->add_option("--synthesize", a->options.synthesized,
                  "Workloads synthesized for a definition that has none (default 2)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--max-input-mb", a->max_input_mb,
                  "Leave out workloads whose inputs take more (default 512)");
  cmd->add_option("--threads", a->options.threads,
                  "CPU threads of both references (default: all cores)");
  cmd->add_flag("--json", a->json, "Print the rows as JSON");
  cmd->footer(
      "Compares under fib run's correctness policy and the op family's built-in tolerances. "
      "Exit status: 0 every checked definition agrees (skipped ones are listed with the reason), "
      "1 some disagree or a reference failed, 2 bad flags or no python3 with torch.");
  cmd->callback([&run, a] { run = [a] { return run_check(*a); }; });
}

}  // namespace fib::cli
