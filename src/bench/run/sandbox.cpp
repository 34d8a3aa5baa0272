#include "sandbox.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "devices.h"
#include "fib/base/diagnostics.h"

namespace fib::bench::detail {

namespace fs = std::filesystem;

namespace {

// A worker started in `spec`'s sandbox answers its greeting: empty, else why not.
std::string try_sandbox(const WorkerSpec& spec) {
  try {
    Worker probe(spec);
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

Json isolation_json(const WorkerSpec& spec) {
  const SandboxSpec& s = spec.sandbox;
  Json limits = Json::object();
  if (spec.memory_limit_bytes) limits["address_space_bytes"] = spec.memory_limit_bytes;
  if (spec.data_limit_bytes) limits["data_bytes"] = spec.data_limit_bytes;
  if (spec.max_processes) limits["processes"] = spec.max_processes;
  if (spec.max_open_files) limits["open_files"] = spec.max_open_files;
  if (!s.enabled()) return Json{{"level", "none"}, {"limits", limits}};
  Json read_only = Json::array();
  for (const fs::path& p : s.read_only) read_only.push_back(p.string());
  return Json{{"level", "sandbox"},
              {"tool", "bubblewrap"},
              {"namespaces", Json::array({"user", "pid", "net", "ipc", "uts", "mount"})},
              {"uid", s.uid},
              // Outside the namespaces: the sandbox's uid, or (bubblewrap started by root where
              // unprivileged user namespaces are not allowed) root without capabilities.
              {"host_uid", s.drop_to_uid ? s.uid : ::getuid()},
              {"read_only", read_only},
              {"gpu_devices", s.gpu},
              // Each in a box of its own: the solution worker, the reference worker and the
              // definition's PyTorch reference.
              {"processes", Json::array({"solution", "reference", "python_reference"})},
              {"limits", limits}};
}

}  // namespace

SandboxChoice choose_sandbox(const RunOptions& o, bool gpu, const Scratch& scratch,
                             const std::function<void(const std::string&)>& warn) {
  SandboxChoice c;
  WorkerSpec spec = worker_spec(o, gpu, scratch.root(), "solution");
  if (o.sandbox == SandboxMode::kOff) {
    c.isolation = isolation_json(spec);
    c.isolation["why"] = "--sandbox off";
    return c;
  }
  std::string why;
  if (const fs::path bwrap = find_bwrap(); bwrap.empty()) {
    why = "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)";
  } else {
    spec.sandbox.bwrap = bwrap;
    std::vector<fs::path> extra = o.sandbox_read_only;
#ifdef FIB_HAVE_TVM_FFI
    // tvm-ffi solutions load libtvm_ffi.so from the Python package's folder (their RUNPATH).
    extra.emplace_back(FIB_TVM_FFI_LIB_DIR);
#endif
    spec.sandbox.read_only = sandbox_read_only_paths(o.worker_executable, extra);
    spec.sandbox.gpu = gpu;
    // As root, the worker drops to the sandbox's uid outside as well where the host lets an
    // unprivileged user make namespaces; else bubblewrap runs as root and maps it inside.
    for (const bool drop :
         ::getuid() == 0 ? std::vector<bool>{true, false} : std::vector<bool>{false}) {
      spec.sandbox.drop_to_uid = drop;
      spec.sandbox.box = scratch.make_box("probe", drop ? static_cast<int>(spec.sandbox.uid) : -1);
      const std::string failed = try_sandbox(spec);
      if (failed.empty()) {
        c.spec = spec.sandbox;
        c.spec.box.clear();
        c.isolation = isolation_json(spec);
        return c;
      }
      why = failed;
    }
  }
  if (o.sandbox == SandboxMode::kRequired) {
    throw Error("--sandbox required", "the worker sandbox cannot be made here: " + why);
  }
  spec.sandbox = SandboxSpec{};
  c.isolation = isolation_json(spec);
  c.isolation["why"] = why;
  warn(fmt::format(
      "WARNING: solutions run UNSANDBOXED: {}. A solution can read and write what fib can (the "
      "dataset, the scratch folder). `--sandbox required` makes this an error, `--sandbox off` "
      "silences it.",
      why));
  return c;
}

namespace {

// A hard link where the box shares the file system, else a copy; readable by the sandbox's uid
// (the box is its, the file stays root's).
void place(const fs::path& from, const fs::path& to, fs::perms mode) {
  std::error_code ec;
  if (fs::exists(to, ec)) return;
  fs::create_hard_link(from, to, ec);
  if (ec) fs::copy_file(from, to, ec);
  if (ec) throw Error(to.string(), fmt::format("cannot stage {}: {}", from.string(), ec.message()));
  fs::permissions(to, mode, fs::perm_options::add, ec);
}

}  // namespace

namespace {

// The workload's scratch folder in the name: a worker keeps the input-set files it mapped, by
// path.
std::string staged_inputs_path(const fs::path& box, const fs::path& inputs) {
  return (box /
          ("inputs-" + inputs.parent_path().filename().string() + "-" + inputs.filename().string()))
      .string();
}

}  // namespace

std::string stage_inputs_in_box(const fs::path& box, const std::string& inputs_file) {
  const std::string staged = staged_inputs_path(box, inputs_file);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(box, ec)) {
    if (e.path().filename() != "out" && e.path() != staged) fs::remove_all(e.path(), ec);
  }
  for (const auto& e : fs::directory_iterator(box / "out", ec)) fs::remove_all(e.path(), ec);
  place(inputs_file, staged,
        fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  return staged;
}

StagedFiles stage_in_box(const fs::path& box, const std::string& inputs_file,
                         const fs::path& library, const std::string& build_key, bool whole_folder) {
  const fs::path inputs = fs::path(inputs_file);
  StagedFiles st;
  st.inputs = staged_inputs_path(box, inputs);
  // The build key in the folder's name: a worker keeps the libraries it loaded, by path. The
  // file keeps its own name: a Python extension module's init function is named after it.
  const fs::path folder = box / ("lib-" + build_key);
  st.library = (folder / library.filename()).string();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(box, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "out" || e.path() == st.inputs || e.path() == folder) continue;
    fs::remove_all(e.path(), ec);
  }
  for (const auto& e : fs::directory_iterator(box / "out", ec)) fs::remove_all(e.path(), ec);
  const auto readable = fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read;
  const auto executable =
      readable | fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec;
  place(inputs, st.inputs, readable);
  fs::create_directories(folder, ec);
  if (!whole_folder) {
    place(library, st.library, executable);
    return st;
  }
  // A Python solution's entry imports its sibling sources: its whole build entry comes along.
  const fs::path entry = library.parent_path();
  for (const auto& e : fs::recursive_directory_iterator(entry, ec)) {
    const fs::path to = folder / fs::relative(e.path(), entry, ec);
    if (e.is_directory(ec)) {
      fs::create_directories(to, ec);
    } else if (e.is_regular_file(ec)) {
      place(e.path(), to, executable);
    }
  }
  return st;
}

std::vector<fs::path> python_paths(const PythonRuntime& python) {
  std::vector<fs::path> paths;
  if (!python.executable.empty()) {
    std::error_code ec;
    paths.emplace_back(python.executable);
    paths.push_back(fs::canonical(python.executable, ec));
  }
  if (!python.library.empty()) paths.push_back(fs::path(python.library).parent_path());
  const std::string& home = python.home;
  for (std::size_t at = 0; at <= home.size();) {
    const std::size_t end = std::min(home.find(':', at), home.size());
    if (end > at) paths.emplace_back(home.substr(at, end - at));
    at = end + 1;
  }
  for (const std::string& entry : python.path) {
    if (!entry.empty()) paths.emplace_back(entry);
  }
  return paths;
}

void take_from_box(const std::vector<std::string>& in_box, const std::vector<std::string>& to) {
  for (std::size_t i = 0; i < in_box.size() && i < to.size(); ++i) {
    std::error_code ec;
    fs::rename(in_box[i], to[i], ec);
  }
}

}  // namespace fib::bench::detail
