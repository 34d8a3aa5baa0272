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

// A worker started in `spec`'s sandbox answers its greeting (kept in *greeting): empty, else
// why not.
std::string try_sandbox(const WorkerSpec& spec, Json* greeting) {
  try {
    Worker probe(spec);
    *greeting = probe.greeting();
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

// The record of the workers' hardening (the kernel, the worker binary, each measure) added to
// `isolation`, from the greeting of a worker started as `spec` says (one is started when
// `greeting` is null).
void add_hardening(Json& isolation, const WorkerSpec& spec, Json greeting,
                   const std::function<void(const std::string&)>& warn) {
  if (greeting.is_null()) try_sandbox(spec, &greeting);
  isolation.update(hardening_record(greeting, spec.executable, warn));
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
              // The compilers of the run's builds run in a sandbox of their own that sees the
              // build's folder and the toolchains (BuildSandbox, fib/bench/builder/build.h).
              {"builds", "sandbox"},
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
    add_hardening(c.isolation, spec, Json(), warn);
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
      Json greeting;
      const std::string failed = try_sandbox(spec, &greeting);
      if (failed.empty()) {
        c.spec = spec.sandbox;
        c.spec.box.clear();
        c.isolation = isolation_json(spec);
        add_hardening(c.isolation, spec, greeting, warn);
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
      "WARNING: solutions run and build UNSANDBOXED: {}. A solution can read and write what fib "
      "can (the dataset, the scratch folder), and its build can read what fib can. `--sandbox "
      "required` makes this an error, `--sandbox off` silences it.",
      why));
  add_hardening(c.isolation, spec, Json(), warn);
  return c;
}

}  // namespace fib::bench::detail
