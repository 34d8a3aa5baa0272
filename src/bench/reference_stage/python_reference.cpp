#include "fib/bench/reference_stage/python_reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "fib/base/json.h"
#include "fib/bench/builder/process.h"
#include "fib/bench/launch/box.h"
#include "fib/dataset/files.h"
#include "fib/tensor/safetensors.h"

namespace fib::bench {

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The bridge reads scalar inputs from the metadata as JSON ("fib.scalar.<name>").
void write_inputs(const fs::path& path, const reference::Arguments& args) {
  std::vector<std::pair<std::string, Tensor>> tensors(args.tensors.begin(), args.tensors.end());
  std::map<std::string, std::string> meta;
  for (const auto& [name, value] : args.scalars) {
    Json v;
    std::visit([&v](auto x) { v = x; }, value);
    meta["fib.scalar." + name] = v.dump();
  }
  write_safetensors(path, tensors, meta);
}

std::string tail_of(const std::string& text, std::size_t n) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

PythonReferenceResult result_of(const PythonReferenceJob& job) {
  PythonReferenceResult r;
  const fs::path error = job.outputs.string() + ".error";
  if (fs::exists(error)) {
    r.error = read_text(error);
    while (!r.error.empty() && r.error.back() == '\n') r.error.pop_back();
    return r;
  }
  if (!fs::exists(job.outputs)) {
    r.error = "the bridge wrote no outputs";
    return r;
  }
  if (job.repeat > 0) {
    const fs::path timing = job.outputs.string() + ".timing.json";
    try {
      const Json parsed = Json::parse(read_text(timing));
      for (const Json& s : parsed.at("runs_s")) {
        r.runs_ms.push_back(s.get<double>() * 1e3);
      }
      r.device = parsed.value("device", std::string());
    } catch (const std::exception& e) {
      r.error =
          fmt::format("the bridge's timing file {} is unreadable: {}", timing.string(), e.what());
      return r;
    }
  }
  r.ok = true;
  return r;
}

// The files the bridge writes for a job: its outputs, and beside them a traceback or timings.
constexpr std::array<const char*, 3> kBridgeSuffixes = {"", ".error", ".timing.json"};

// The python's sys.path as the probe saw it, for PYTHONPATH: in the sandbox HOME is the private
// /tmp, so a user site (~/.local, where torch may be installed) would otherwise drop out.
std::string python_path_variable(const PythonRuntime& python) {
  std::string joined;
  for (const std::string& entry : python.path) {
    if (entry.empty()) continue;
    if (!joined.empty()) joined += ':';
    joined += entry;
  }
  return "PYTHONPATH=" + joined;
}

// The bridge's command line: in the sandbox (where it has one), with HOME and TMPDIR in its
// private /tmp and the python's own module path.
std::vector<std::string> bridge_command(const PythonReferenceSettings& settings,
                                        const fs::path& batch_file) {
  std::vector<std::string> bridge = {settings.python.executable,
                                     (settings.bridge_dir / "run_reference.py").string(),
                                     "--batch",
                                     batch_file.string(),
                                     "--device",
                                     settings.device};
  if (!settings.sandbox.enabled()) return bridge;
  bridge.insert(bridge.begin(), {"/usr/bin/env", "HOME=/tmp", "TMPDIR=/tmp",
                                 python_path_variable(settings.python)});
  return sandbox_command(settings.sandbox, bridge);
}

}  // namespace

std::vector<PythonReferenceResult> run_python_references(
    const PythonReferenceSettings& settings, const std::vector<PythonReferenceJob>& jobs) {
  // Sandboxed, the box holds only this batch's files, written straight into it; the bridge
  // writes each job's files in the box's out/, from where they are moved to the job's paths.
  detail::Box box(settings.sandbox.enabled() ? settings.sandbox.box : fs::path(),
                  settings.sandbox.box_inside);
  const fs::path work_dir = box.sandboxed() ? box.dir() : settings.work_dir;
  if (box.sandboxed()) {
    box.clear();
  } else {
    fs::create_directories(work_dir);
  }
  std::map<std::string, fs::path> def_files;  // by definition name
  std::vector<std::string> written;           // where the bridge writes each job's outputs
  std::string batch;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Definition& def = *jobs[i].def;
    fs::path& def_file = def_files[def.name];
    if (def_file.empty()) {
      def_file = work_dir / fmt::format("definition-{}.json", def_files.size());
      write_file_atomic(def_file, dump_json_pretty(to_json(def)));
    }
    const fs::path inputs = work_dir / fmt::format("python-inputs-{}.safetensors", i);
    write_inputs(inputs, jobs[i].args);
    std::error_code ec;
    for (const char* suffix : kBridgeSuffixes) {
      const std::string file = jobs[i].outputs.string() + suffix;
      fs::remove(file, ec);
      const std::string in_box = box.output(file);
      if (*suffix == '\0') written.push_back(in_box);
    }
    Json j{{"definition", box.inside(def_file)},
           {"inputs", box.inside(inputs)},
           {"outputs", written.back()},
           {"seed", jobs[i].seed}};
    if (jobs[i].repeat > 0) j["repeat"] = jobs[i].repeat;
    if (settings.threads > 0) j["threads"] = settings.threads;
    batch += j.dump() + "\n";
  }
  const fs::path batch_file = work_dir / "python-jobs.jsonl";
  write_file_atomic(batch_file, batch);
  const detail::ProcessResult p = detail::run_process(
      bridge_command(settings, box.inside(batch_file)), work_dir, settings.deadline, 64 * 1024);
  // Out of the box before anything reads them; a link or other odd file is removed, so its job
  // reads as one whose outputs are missing.
  const std::string unsound = box.take_outputs();
  std::vector<PythonReferenceResult> results;
  for (const PythonReferenceJob& job : jobs) {
    PythonReferenceResult r = result_of(job);
    if (!r.ok && (!p.started || p.timed_out || p.signal != 0)) {
      r.error = !p.started    ? "the PyTorch reference could not start: " + p.error
                : p.timed_out ? fmt::format("the PyTorch reference timed out ({:.0f} s)", p.seconds)
                              : fmt::format("the PyTorch reference was killed by signal {}: {}",
                                            p.signal, tail_of(p.output, 2000));
    } else if (!r.ok && r.error == "the bridge wrote no outputs") {
      r.error += ": " + (unsound.empty() ? tail_of(p.output, 2000) : unsound);
    }
    results.push_back(std::move(r));
  }
  std::error_code ec;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    fs::remove(work_dir / fmt::format("python-inputs-{}.safetensors", i), ec);
  }
  for (const auto& [name, file] : def_files) fs::remove(file, ec);
  return results;
}

reference::Outputs read_python_outputs(const Definition& def, const fs::path& file,
                                       std::vector<std::string>* notes) {
  const SafetensorsFile f = SafetensorsFile::open(file);
  reference::Outputs out;
  for (const auto& spec : def.outputs) {
    const auto keys = f.keys();
    if (std::find(keys.begin(), keys.end(), spec.name) == keys.end()) {
      throw Error(file.string(), fmt::format("the PyTorch reference of {} returned no output '{}'",
                                             def.name, spec.name));
    }
    Tensor t = f.read(spec.name);
    if (t.dtype() != spec.dtype) {
      Tensor converted(spec.dtype, t.shape());
      for (std::int64_t i = 0; i < t.numel(); ++i) converted.set(i, t.get(i));
      if (notes != nullptr) {
        notes->push_back(
            fmt::format("the PyTorch reference returned '{}' as {}; converted to "
                        "the declared {}",
                        spec.name, dtype_name(t.dtype()), dtype_name(spec.dtype)));
      }
      t = std::move(converted);
    }
    out.emplace(spec.name, std::move(t));
  }
  return out;
}

fs::path python_bridge_dir(const fs::path& built_in) {
  fs::path dir = built_in;
  if (const char* env = std::getenv("FIB_PYTHON_BRIDGE_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  }
  if (dir.empty() || !fs::exists(dir / "run_reference.py")) {
    throw Error(dir.empty() ? "run_reference.py" : (dir / "run_reference.py").string(),
                "cannot find fib's Python bridge (python/fib_bridge/run_reference.py)",
                "set FIB_PYTHON_BRIDGE_DIR to the folder holding run_reference.py");
  }
  return dir;
}

}  // namespace fib::bench
