// fib inputs: materialize one workload's inputs (blobs, scalars, structure-aware synthesis)
// into a safetensors file; scalars and notes travel in its metadata.
#include <fmt/format.h>

#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/safetensors.h"

namespace fib::cli {

namespace {
struct InputsArgs {
  std::string dataset, definition, workload, output;
  std::uint64_t seed = 0;
  bool no_blobs = false;
  bool write_blobs = false;
};

// The synthesized tensors of inputs whose workload names a blob that is not present, written as
// that blob (the tensor under its tensor_key, each file whole): another harness reading the
// dataset then sees the very tensors fib made. Returns the files written.
std::vector<std::string> write_missing_blobs(const Definition& def, const Workload& w,
                                             const std::filesystem::path& root,
                                             const MaterializedInputs& in) {
  std::map<std::string, std::vector<std::pair<std::string, Tensor>>> files;
  for (const WorkloadInput& input : w.inputs) {
    if (input.kind != InputKind::kSafetensors) continue;
    const std::filesystem::path file = (root / input.path).lexically_normal();
    if (std::filesystem::exists(file) || !in.tensors.contains(input.name)) continue;
    files[file.string()].emplace_back(input.tensor_key.empty() ? input.name : input.tensor_key,
                                      in.tensors.at(input.name));
  }
  std::vector<std::string> written;
  for (const auto& [file, tensors] : files) {
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    write_safetensors(
        file, tensors,
        {{"fib.definition", def.name}, {"fib.workload", w.uuid}, {"fib.synthesized", "1"}});
    written.push_back(file);
  }
  return written;
}

int run_inputs(const InputsArgs& a) {
  const TraceSet set = TraceSet::load(dataset_path(a.dataset));
  const Definition& def = find_definition(set, a.definition);
  const Workload& w = find_workload(set, def, a.workload);
  MaterializeOptions opt;
  opt.seed = a.seed;
  opt.dataset_root = set.root();
  opt.use_blobs = !a.no_blobs;
  const MaterializedInputs in = materialize_inputs(def, w, opt);
  const auto problems = check_input_constraints(def, w, in);
  if (a.write_blobs) {
    for (const auto& file : write_missing_blobs(def, w, set.root(), in)) {
      std::cout << fmt::format("wrote blob {}\n", file);
    }
    if (a.output.empty()) return problems.empty() ? kExitOk : kExitFindings;
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& spec : def.inputs) {
    if (auto it = in.tensors.find(spec.name); it != in.tensors.end())
      tensors.emplace_back(spec.name, it->second);
  }
  std::map<std::string, std::string> meta;
  meta["fib.definition"] = def.name;
  meta["fib.workload"] = w.uuid;
  meta["fib.seed"] = std::to_string(a.seed);
  meta["fib.input_synthesis"] = std::to_string(kInputSynthesisVersion);
  for (const auto& [name, value] : in.scalars) {
    Json v;
    std::visit([&v](auto x) { v = x; }, value);
    meta["fib.scalar." + name] = v.dump();
  }
  for (const auto& [name, origin] : in.origins)
    meta["fib.origin." + name] = std::string(input_origin_name(origin));
  write_safetensors(a.output, tensors, meta);
  for (const auto& n : in.notes) std::cerr << "fib inputs: note: " << n << "\n";
  for (const auto& p : problems) std::cerr << "fib inputs: error: constraint " << p << "\n";
  std::cout << fmt::format(
      "wrote {} tensors and {} scalars of {} workload {} (seed {}, input synthesis {}) to {}\n",
      tensors.size(), in.scalars.size(), def.name, w.uuid, a.seed, kInputSynthesisVersion,
      a.output);
  return problems.empty() ? kExitOk : kExitFindings;
}
}  // namespace

void register_inputs(CLI::App& app, Runner& run) {
  auto a = std::make_shared<InputsArgs>();
  CLI::App* cmd =
      app.add_subcommand("inputs", "Materialize a workload's inputs into a safetensors file");
  add_dataset_option(cmd, a->dataset);
  cmd->add_option("--definition", a->definition, "Definition name")->required();
  cmd->add_option("--workload", a->workload, "Workload uuid")->required();
  cmd->add_option("--output", a->output,
                  "Output .safetensors file (required without --write-blobs)");
  cmd->add_option("--seed", a->seed, "Seed for synthesized and random inputs (default 0)");
  cmd->add_flag("--no-blobs", a->no_blobs, "Synthesize every tensor even where a blob exists");
  cmd->add_flag("--write-blobs", a->write_blobs,
                "Write the synthesized tensors of blobs the workload names but the dataset lacks "
                "as those blobs, for other harnesses to read");
  cmd->callback([&run, a] {
    if (a->output.empty() && !a->write_blobs) throw CLI::RequiredError("--output");
    run = [a] { return run_inputs(*a); };
  });
}

}  // namespace fib::cli
