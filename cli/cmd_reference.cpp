// fib reference: run a definition's native reference on inputs from a safetensors file (as
// `fib inputs` writes them) and write the outputs.
#include <fmt/format.h>

#include <chrono>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/reference/reference.h"
#include "fib/tensor/safetensors.h"

namespace fib::cli {

namespace {
struct ReferenceArgs {
  std::string dataset, definition, inputs, output, device = "cpu";
  unsigned threads = 0;
  std::uint64_t seed = 0;
};

int run_reference_cmd(const ReferenceArgs& a) {
  if (a.device != "cpu") {
    throw Error("--device", fmt::format("device '{}' is not available in this build", a.device),
                "CUDA references need a CUDA build of fib; use --device cpu");
  }
  const TraceSet set = TraceSet::load(dataset_path(a.dataset));
  const Definition& def = find_definition(set, a.definition);
  const auto file = SafetensorsFile::open(a.inputs);
  reference::Arguments args;
  for (const auto& key : file.keys()) args.tensors.emplace(key, file.read(key));
  for (const auto& [k, v] : file.header().metadata) {
    if (k.rfind("fib.scalar.", 0) != 0) continue;
    const Json j = Json::parse(v);
    Scalar s = j.is_boolean()          ? Scalar{j.get<bool>()}
               : j.is_number_integer() ? Scalar{j.get<std::int64_t>()}
                                       : Scalar{j.get<double>()};
    args.scalars.emplace(k.substr(11), s);
  }
  // Var axes come from the input shapes the definition names them in.
  AxisValues var;
  for (const auto& name : def.var_axes()) {
    for (const auto& spec : def.inputs) {
      if (!spec.shape) continue;
      auto it = args.tensors.find(spec.name);
      if (it == args.tensors.end()) continue;
      for (std::size_t i = 0; i < spec.shape->size() && i < it->second.rank(); ++i) {
        if ((*spec.shape)[i] == name && !axis_value(var, name))
          var.emplace_back(name, it->second.dim(i));
      }
    }
    if (!axis_value(var, name)) {
      throw Error(a.inputs, fmt::format("cannot tell var axis '{}' from the inputs' shapes", name));
    }
  }
  std::string why;
  const reference::Kernel* k = reference::find_kernel(def, &why);
  if (!k) throw Error(def.name, why);
  const auto t0 = std::chrono::steady_clock::now();
  const reference::Outputs out = reference::run(def, var, args, a.threads, a.seed);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& spec : def.outputs) tensors.emplace_back(spec.name, out.at(spec.name));
  write_safetensors(a.output, tensors,
                    {{"fib.definition", def.name}, {"fib.reference", std::string(k->id())}});
  std::cout << fmt::format("{}: native reference {} on cpu in {:.2f} ms; wrote {}\n", def.name,
                           k->id(), ms, a.output);
  return kExitOk;
}
}  // namespace

void register_reference(CLI::App& app, Runner& run) {
  auto a = std::make_shared<ReferenceArgs>();
  CLI::App* cmd =
      app.add_subcommand("reference", "Run a definition's native reference on saved inputs");
  cmd->add_option("--dataset", a->dataset, "Dataset folder (default: $FIB_DATASET_PATH)");
  cmd->add_option("--definition", a->definition, "Definition name")->required();
  cmd->add_option("--inputs", a->inputs, "Inputs .safetensors (as fib inputs writes it)")
      ->required();
  cmd->add_option("--output", a->output, "Output .safetensors file")->required();
  cmd->add_option("--device", a->device, "cpu (cuda with a CUDA build)");
  cmd->add_option("--threads", a->threads, "CPU threads (default: all cores)");
  cmd->add_option("--seed", a->seed, "Seed of sampling references");
  cmd->callback([&run, a] { run = [a] { return run_reference_cmd(*a); }; });
}

}  // namespace fib::cli
