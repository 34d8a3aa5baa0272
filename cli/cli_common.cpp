#include "cli/cli_common.h"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "fib/trace/suggest.h"

namespace fib::cli {

std::string dataset_path(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("FIB_DATASET_PATH"); env && *env) return env;
  throw Error("--dataset", "no dataset given", "use --dataset DIR or set FIB_DATASET_PATH");
}

const Definition& find_definition(const TraceSet& set, const std::string& name) {
  if (const Definition* d = set.definition(name)) return *d;
  std::vector<std::string> names;
  for (const auto& d : set.definitions()) names.push_back(d.value.name);
  throw Error(set.root().string(), fmt::format("no definition named '{}'", name),
              suggest(name, names));
}

const Workload& find_workload(const TraceSet& set, const Definition& def, const std::string& uuid) {
  std::vector<std::string> uuids;
  for (const auto& w : set.workloads(def.name)) {
    if (w.value.workload.uuid == uuid) return w.value.workload;
    uuids.push_back(w.value.workload.uuid);
  }
  throw Error(
      def.name, fmt::format("no workload with uuid '{}'", uuid),
      uuids.empty() ? std::string("the definition has no workloads") : suggest(uuid, uuids));
}

void add_dataset_option(CLI::App* cmd, std::string& dataset) {
  cmd->add_option("--dataset,--local", dataset,
                  "Dataset folder (--local is upstream's name for it; default: $FIB_DATASET_PATH)");
}

void add_dataset_option(CLI::App* cmd, std::vector<std::string>& datasets,
                        const std::string& more) {
  cmd->add_option("--dataset,--local", datasets,
                  fmt::format("Dataset folder, repeatable: {} (--local is upstream's name for "
                              "it; default: $FIB_DATASET_PATH)",
                              more));
}

void add_sandbox_option(CLI::App* cmd, bench::SandboxMode& mode, const std::string& help) {
  // Checked as names and mapped afterwards: CLI11 would print the enum's values, which are
  // bytes, as characters in the help and in its error for a bad value.
  static const std::map<std::string, bench::SandboxMode> kModes = {
      {"auto", bench::SandboxMode::kAuto},
      {"required", bench::SandboxMode::kRequired},
      {"off", bench::SandboxMode::kOff}};
  cmd->add_option_function<std::string>(
         "--sandbox", [&mode](const std::string& name) { mode = kModes.at(name); }, help)
      ->check(CLI::IsMember(kModes))
      ->option_text("auto|required|off");
}

std::filesystem::path worker_executable() {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path worker = self.parent_path() / "fib-worker";
  return ::access(worker.c_str(), X_OK) == 0 ? worker : self;
}

}  // namespace fib::cli
