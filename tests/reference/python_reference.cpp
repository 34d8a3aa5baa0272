#include "python_reference.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fib/base/json.h"
#include "fib/tensor/safetensors.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {

namespace {

int shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string slurp(const std::filesystem::path& p) { return TempDir::read_file(p); }

}  // namespace

std::optional<std::string> torch_python() {
  static const std::optional<std::string> found = []() -> std::optional<std::string> {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("FIB_TORCH_PYTHON"); env && *env)
      candidates.emplace_back(env);
    candidates.emplace_back("/usr/bin/python3");
    candidates.emplace_back("python3");
    for (const auto& c : candidates) {
      if (shell(c + " -c 'import torch' >/dev/null 2>&1") == 0) return c;
    }
    return std::nullopt;
  }();
  return found;
}

std::string torch_version(const std::string& python) {
  TempDir tmp;
  shell(python + " -c 'import torch; print(torch.__version__, end=\"\")' > " +
        (tmp.path() / "v").string());
  return slurp(tmp.path() / "v");
}

struct PythonReferenceBatch::Impl {
  TempDir dir;
  std::size_t count = 0;
  std::string jobs;
};

PythonReferenceBatch::PythonReferenceBatch() : impl_(std::make_unique<Impl>()) {}
PythonReferenceBatch::~PythonReferenceBatch() = default;

std::size_t PythonReferenceBatch::add(const Definition& def, const reference::Arguments& args,
                                      std::uint64_t seed) {
  const std::size_t id = impl_->count++;
  const std::string base = "job" + std::to_string(id);
  impl_->dir.write(base + ".json", dump_json_pretty(to_json(def)));
  std::vector<std::pair<std::string, Tensor>> tensors(args.tensors.begin(), args.tensors.end());
  std::map<std::string, std::string> meta;
  for (const auto& [name, value] : args.scalars) {
    Json v;
    std::visit([&v](auto x) { v = x; }, value);
    meta["fib.scalar." + name] = v.dump();
  }
  const auto dir = impl_->dir.path();
  write_safetensors(dir / (base + ".in.safetensors"), tensors, meta);
  Json job = Json::object();
  job["definition"] = (dir / (base + ".json")).string();
  job["inputs"] = (dir / (base + ".in.safetensors")).string();
  job["outputs"] = (dir / (base + ".out.safetensors")).string();
  job["seed"] = seed;
  impl_->jobs += job.dump() + "\n";
  return id;
}

void PythonReferenceBatch::run() {
  const auto python = torch_python();
  if (!python) throw Error("python3", "no python3 with torch");
  impl_->dir.write("jobs.jsonl", impl_->jobs);
  const std::string script = (source_dir() / "python/fib_bridge/run_reference.py").string();
  shell(*python + " " + script + " --batch " + (impl_->dir.path() / "jobs.jsonl").string() +
        " 2> " + (impl_->dir.path() / "stderr").string());
}

reference::Outputs PythonReferenceBatch::outputs(std::size_t id) const {
  const auto base = impl_->dir.path() / ("job" + std::to_string(id) + ".out.safetensors");
  if (std::filesystem::exists(base.string() + ".error")) {
    throw Error("job " + std::to_string(id),
                "the PyTorch reference failed:\n" + slurp(base.string() + ".error"));
  }
  if (!std::filesystem::exists(base)) {
    throw Error("job " + std::to_string(id),
                "no output (did run() happen?):\n" + slurp(impl_->dir.path() / "stderr"));
  }
  auto file = SafetensorsFile::open(base);
  reference::Outputs out;
  for (const auto& key : file.keys()) out.emplace(key, file.read(key));
  return out;
}

reference::Outputs run_python_reference(const Definition& def, const reference::Arguments& args,
                                        std::uint64_t seed) {
  PythonReferenceBatch batch;
  const std::size_t id = batch.add(def, args, seed);
  batch.run();
  return batch.outputs(id);
}

}  // namespace fib::testing
