// fib workloads synth: append realistic synthesized workloads for a definition to its
// workloads file.
#include <fmt/format.h>

#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/tensor/workload_synth.h"

namespace fib::cli {

namespace {
struct SynthArgs {
  std::string dataset, definition, preset = "mixed";
  int count = 4;
  std::uint64_t seed = 0;
  std::int64_t max_tokens = 8192, max_kv_len = 8192;
  bool dry_run = false;
};

int run_synth(const SynthArgs& a) {
  TraceSet set = TraceSet::load(dataset_path(a.dataset));
  const Definition def = find_definition(set, a.definition);
  auto preset = parse_workload_preset(a.preset);
  if (!preset)
    throw Error("--preset", fmt::format("unknown preset '{}'", a.preset),
                "use decode, prefill or mixed");
  SynthOptions o;
  o.preset = *preset;
  o.count = a.count;
  o.seed = a.seed;
  o.max_tokens = a.max_tokens;
  o.max_kv_len = a.max_kv_len;
  const auto ws = synthesize_workloads(def, o);
  std::vector<Trace> records;
  for (const auto& w : ws) {
    Trace t;
    t.definition = def.name;
    t.workload = w;
    records.push_back(std::move(t));
    std::string axes;
    for (const auto& [n, v] : w.axes) axes += fmt::format(" {}={}", n, v);
    std::cout << fmt::format("{} {}:{}\n", a.dry_run ? "would add" : "added", w.uuid, axes);
  }
  if (!a.dry_run) append_workloads(set, records);
  return kExitOk;
}
}  // namespace

void register_workloads(CLI::App& app, Runner& run) {
  auto a = std::make_shared<SynthArgs>();
  CLI::App* cmd = app.add_subcommand("workloads", "Work with a dataset's workloads");
  cmd->require_subcommand(1);
  CLI::App* synth = cmd->add_subcommand("synth", "Append synthesized workloads for a definition");
  add_dataset_option(synth, a->dataset);
  synth->add_option("--definition", a->definition, "Definition name")->required();
  synth->add_option("--count", a->count, "How many workloads (default 4)")
      ->check(CLI::Range(1, 100000));
  synth->add_option("--preset", a->preset, "decode, prefill or mixed (default)");
  synth->add_option("--seed", a->seed, "Seed (default 0)");
  synth->add_option("--max-tokens", a->max_tokens, "Most query tokens per workload (default 8192)");
  synth->add_option("--max-kv-len", a->max_kv_len, "Most keys per sequence (default 8192)");
  synth->add_flag("--dry-run", a->dry_run, "Print the workloads without writing them");
  synth->callback([&run, a] { run = [a] { return run_synth(*a); }; });
}

}  // namespace fib::cli
