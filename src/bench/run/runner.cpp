// run_benchmark: sets a run up (devices, evaluation settings, seed, lanes), plans it, runs the
// plan on the lanes and summarizes what they recorded.

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

#include "devices.h"
#include "environment.h"
#include "fib/bench/builder/python_build.h"
#include "fib/bench/builder/python_runtime.h"
#include "fib/bench/reference_stage/python_reference.h"
#include "fib/bench/run/run.h"
#include "fib/dataset/trace_set.h"
#include "lanes.h"
#include "plan.h"
#include "records.h"
#include "run_state.h"
#include "summary.h"
#include "timer.h"

namespace fib::bench {

namespace {

using Clock = std::chrono::steady_clock;

// The evaluation settings' layers below the command line: the built-in ones and --config's
// (its unknown names are warned about).
void load_eval_settings(detail::RunState& run, const TraceSet& set) {
  run.builtin = builtin_eval_config();
  check_eval_settings(run.options.cli, "command line");
  if (!run.options.config) return;
  run.user = load_eval_config(*run.options.config);
  std::vector<std::string> ops = set.op_types(), names;
  for (const auto& d : set.definitions()) names.push_back(d.value.name);
  for (const auto& d : check_eval_config_names(*run.user, ops, names)) {
    run.message(d.to_string());
  }
}

std::uint64_t run_seed(const RunOptions& o) {
  if (o.seed) return *o.seed;
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

BuildOptions build_options(const RunOptions& o) {
  BuildOptions b;
  b.cache_dir = o.build_cache;
  b.abi_include_dir = o.abi_include_dir;
  b.force = o.rebuild;
  b.python = o.python;
  return b;
}

// What a sandboxed worker must see of the Python runtime when the plan has solutions that run
// in it (its prefixes, sys.path and libpython's folder: python_paths). Probing the runtime costs
// an interpreter start, so only such plans pay it.
std::vector<std::filesystem::path> python_runtime_paths(const detail::Plan& plan,
                                                        const RunOptions& o) {
  const bool needed = std::any_of(plan.items.begin(), plan.items.end(), [](const auto& item) {
    return std::any_of(item.pending.begin(), item.pending.end(),
                       [](const Solution* s) { return detail::runs_in_python(*s); });
  });
  if (!needed) return {};
  std::string why;
  const std::optional<PythonRuntime> runtime = find_python(o.python, PythonUse::kRuntime, &why);
  if (!runtime) return {};  // each such solution's build says why
  return python_paths(*runtime);
}

// The reference cache of --reference-cache: null when off, or (with a warning) where a solution
// worker could see it: inside the run's scratch folder or a folder the sandbox binds.
std::unique_ptr<detail::ReferenceCache> open_reference_cache(
    const detail::RunState& run, const std::function<void(const std::string&)>& warn) {
  const RunOptions& o = run.options;
  using Kind = ReferenceCacheChoice::Kind;
  if (o.reference_cache.kind == Kind::kOff) return nullptr;
  namespace fs = std::filesystem;
  const fs::path dir = o.reference_cache.kind == Kind::kDefault
                           ? detail::default_reference_cache_dir(o.build_cache)
                           : fs::absolute(o.reference_cache.folder).lexically_normal();
  const auto inside = [&dir](const fs::path& folder) {
    const fs::path f = fs::absolute(folder).lexically_normal();
    const auto [end, _] = std::mismatch(f.begin(), f.end(), dir.begin(), dir.end());
    return end == f.end();
  };
  std::vector<fs::path> seen = run.sandbox.spec.read_only;
  seen.push_back(run.scratch->root());
  for (const fs::path& folder : seen) {
    if (!folder.empty() && inside(folder)) {
      warn(
          fmt::format("warning: the reference cache {} lies in {}, which solution workers see; "
                      "it is not used (--reference-cache DIR elsewhere)",
                      dir.string(), folder.string()));
      return nullptr;
    }
  }
  try {
    return std::make_unique<detail::ReferenceCache>(dir, o.reference_cache_bytes);
  } catch (const std::exception& e) {
    warn(fmt::format("warning: the reference cache {} cannot be used: {}", dir.string(), e.what()));
    return nullptr;
  }
}

void count_reference_cache(const detail::ReferenceCache& cache, ReferenceCacheUse& r) {
  const detail::ReferenceCacheCounts c = cache.counts();
  r.dir = cache.dir().string();
  r.hits = c.hits;
  r.misses = c.misses;
  r.corrupt = c.corrupt;
  r.stores = c.stores;
  r.evicted = c.evicted;
}

}  // namespace

RunResult run_benchmark(const RunOptions& options, const RunCallbacks& callbacks) {
  // A worker that closes its channel must cost its evaluation, never the run: writes to a gone
  // peer fail with EPIPE instead of killing fib.
  ::signal(SIGPIPE, SIG_IGN);
  const auto wall0 = Clock::now();
  const detail::DeviceChoice devices = detail::parse_devices(options.device);
  detail::RunState run(options, callbacks);
  run.gpu = devices.gpu;
  // Traces are read only to resume: a run that does not copies the rest of a loaded dataset.
  TraceSet set = !options.loaded_dataset ? TraceSet::load(options.dataset)
                 : options.resume        ? *options.loaded_dataset
                                         : options.loaded_dataset->without_traces();
  load_eval_settings(run, set);
  run.seed = run_seed(options);
  run.result.environment.seed = run.seed;
  run.host = detail::host_json();
  for (auto it = options.environment_extra.begin(); it != options.environment_extra.end(); ++it) {
    run.host[it.key()] = *it;
  }
  std::vector<std::unique_ptr<detail::Lane>> lanes = detail::make_lanes(devices);

  run.build = build_options(options);
  run.result.counts.broken_records =
      detail::check_records(set, options, [&run](const std::string& m) { run.message(m); });
  detail::Plan plan =
      detail::plan_run(set, options, devices.gpu, [&run](const std::string& m) { run.message(m); });
  run.total = plan.evaluations;
  run.result.counts.resumed = plan.resumed;
  run.result.counts.reference_failures += plan.reference_failures;
  run.python = plan.python;
  if (run.python) run.python_bridge_dir = python_bridge_dir(options.python_bridge_dir);
  if (callbacks.on_start) callbacks.on_start(run.total);
  run.scratch = std::make_unique<detail::Scratch>();
  RunOptions sandboxed = options;
  for (auto& path : python_runtime_paths(plan, options)) {
    sandboxed.sandbox_read_only.push_back(std::move(path));
  }
  run.sandbox = detail::choose_sandbox(sandboxed, devices.gpu, *run.scratch,
                                       [&run](const std::string& m) { run.message(m); });
  // Builds follow the workers' --sandbox choice: the compilers see the toolchains and whatever
  // a worker sees (tvm-ffi's library, the Python prefix), never the dataset or $HOME. Their
  // bubblewrap runs as fib's user, so the build cache stays fib's.
  run.build.sandbox = BuildSandbox{run.sandbox.spec.bwrap, run.sandbox.spec.read_only};
  const int box_uid = run.sandbox.spec.drop_to_uid ? static_cast<int>(run.sandbox.spec.uid) : -1;
  for (std::size_t i = 0; i < lanes.size() && run.sandbox.spec.enabled(); ++i) {
    lanes[i]->box = run.scratch->make_box(fmt::format("solution-{}", i), box_uid);
    lanes[i]->reference_box = run.scratch->make_box(fmt::format("reference-{}", i), box_uid);
    // The PyTorch reference's bubblewrap starts as fib's user (mapped to the sandbox's uid
    // inside), so its box stays fib's user's.
    lanes[i]->python_reference_box =
        run.scratch->make_box(fmt::format("python-reference-{}", i), -1);
  }

  if (options.build_only) {
    run.result.counts.builds_failed = detail::build_solutions(run, lanes, plan.items);
    run.result.timing.wall_seconds = std::chrono::duration<double>(Clock::now() - wall0).count();
    return std::move(run.result);
  }
  run.reference_cache = open_reference_cache(run, [&run](const std::string& m) { run.message(m); });

  detail::run_lanes(run, lanes, plan.items, set);
  std::map<std::string, int> skipped;  // solution -> evaluations not run after its timeout
  for (const auto& lane : lanes) detail::add_lane_totals(lane->totals.get(), run.result, skipped);
  if (run.reference_cache) count_reference_cache(*run.reference_cache, run.result.reference_cache);

  run.result.environment.gpu = devices.gpu;
  for (const auto& lane : lanes) {
    run.result.environment.devices.push_back(detail::lane_label(*lane));
  }
  run.result.timing.wall_seconds = std::chrono::duration<double>(Clock::now() - wall0).count();
  run.result.summary = detail::summarize_run(run.result.traces, set, skipped);
  return std::move(run.result);
}

}  // namespace fib::bench
