// The run loop of `fib run`: for every definition x workload x solution of a dataset, build the
// solution (cached), materialize fresh seeded inputs, compute reference outputs and latency in a
// reference worker, evaluate the solution in a solution worker, judge its outputs here, and
// append the trace at once. A crash, hang or out-of-memory of a solution costs that one
// evaluation; the run goes on.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/bench/eval/eval_config.h"
#include "fib/trace/signature.h"
#include "fib/trace/trace.h"

namespace fib {
class TraceSet;
}  // namespace fib

namespace fib::bench {

// `--sandbox`: solution workers in a bubblewrap sandbox (docs/run.md, "Isolation").
enum class SandboxMode : std::uint8_t {
  kAuto,      // where it can be made; else unsandboxed, with a loud warning
  kRequired,  // a run that cannot make it is an error
  kOff,
};

// `--gpu-timer`: how CUDA lanes time a call.
enum class GpuTimer : std::uint8_t {
  kEvents,     // CUDA events, the empty event pair's cost subtracted
  kEventsRaw,  // not subtracted
  kCupti,      // kernel activity of every stream
};
// `--inputs-on`: where a CUDA lane's input sets are made (RunOptions::inputs_on).
enum class InputsOn : std::uint8_t { kDevice, kHost };
// `--reference`: what the solutions are checked against (RunOptions::reference).
enum class ReferenceChoice : std::uint8_t { kAuto, kNative, kPython };

// `--reference-cache`: where the reference outputs are kept across runs.
struct ReferenceCacheChoice {
  enum class Kind : std::uint8_t { kDefault, kFolder, kOff };
  Kind kind = Kind::kDefault;    // kDefault: "reference" beside the build cache's folder
  std::filesystem::path folder;  // kFolder's
  static ReferenceCacheChoice off() { return {Kind::kOff, {}}; }
  static ReferenceCacheChoice in(std::filesystem::path f) { return {Kind::kFolder, std::move(f)}; }
};

// The options' values by their command-line names, which traces, worker messages and cache keys
// carry too: "events", "events-raw", "cupti"; "device", "host"; "auto", "native", "python".
std::string_view option_name(GpuTimer timer);
std::string_view option_name(InputsOn where);
std::string_view option_name(ReferenceChoice reference);
// Parsed once, at the command line: each throws fib::Error naming its flag for a name that is
// none of its values (GPU timers other than "events" also need the CUDA path).
GpuTimer parse_gpu_timer(const std::string& name);
InputsOn parse_inputs_on(const std::string& name);
ReferenceChoice parse_reference_choice(const std::string& name);
// A folder, "off", or empty for the default.
ReferenceCacheChoice parse_reference_cache(const std::string& text);

struct RunOptions {
  std::filesystem::path dataset;
  // The dataset already loaded (fib serve's snapshot of `dataset`): the run copies what it reads
  // of it (its traces only with `resume`) instead of loading the folder again. Traces are still
  // appended to `dataset`'s files.
  std::shared_ptr<const TraceSet> loaded_dataset;
  std::vector<std::string> definitions;         // allow-list; empty: all
  std::vector<std::string> solutions;           // allow-list; empty: all
  std::vector<std::string> workloads;           // allow-list of workload uuids; empty: all
  EvalSettings cli;                             // --warmup-runs, --iterations, ... (highest layer)
  std::optional<std::filesystem::path> config;  // --config eval.yaml
  double timeout_seconds = 300;                 // per (solution, workload) evaluation
  bool resume = false;
  // A record named in `definitions` or `solutions` that is missing or failed to load is a
  // warning instead of an error that stops the run before it starts.
  bool keep_going = false;
  bool isolated = false;  // a fresh worker per evaluation
  SandboxMode sandbox = SandboxMode::kAuto;
  // Bound read-only into the sandbox besides what fib finds itself (sandbox_read_only_paths):
  // a Python prefix, a CUDA toolkit outside /usr.
  std::vector<std::filesystem::path> sandbox_read_only;
  std::string device = "cpu";
  std::optional<std::uint64_t> seed;        // absent: drawn at random and recorded
  std::filesystem::path worker_executable;  // fib-worker, or the fib binary (`fib worker`)
  std::filesystem::path build_cache;        // empty: the default cache
  // The reference outputs (and runs) kept across runs, content-addressed (--reference-cache).
  ReferenceCacheChoice reference_cache;
  std::uint64_t reference_cache_bytes = 4ull << 30;  // its size bound (oldest entries go)
  bool rebuild = false;                              // compile even what the cache holds
  std::filesystem::path abi_include_dir;             // holds fib/solution.h
  std::uint64_t memory_limit_bytes = 0;              // per worker (RLIMIT_AS); 0: half of the RAM
  unsigned threads = 0;                              // per worker; 0: all cores
  bool fixed_iterations = false;                     // no noise-based early stop
  double max_trial_seconds = 2.0;                    // time cap of one trial's timed calls
  // A trial's warmup stops once its calls took this long (after one call at least); 0: always
  // --warmup-runs calls. Long kernels need one call to warm up, not ten.
  double max_warmup_seconds = 0.1;
  std::uint64_t input_pool_bytes = 256ull << 20;  // budget for distinct timing input sets (host)
  // GPU lanes: the timing input sets beyond the checked ones are made on the device, by each
  // worker, from the checked sets (their floating-point tensors permuted); this is the budget of
  // one worker's device copies.
  std::uint64_t device_pool_bytes = 2ull << 30;
  // GPU lanes: where the bulk of each input set (its counter-based fills: weights, activations,
  // caches) is made: "device" (by each worker in its device memory, from the fills the input-set
  // file carries instead of their bytes) or "host" (made by the orchestrator and copied to the
  // device). Indices, page tables, routing and blobs are made or read on the host either way.
  InputsOn inputs_on = InputsOn::kDevice;
  // GPU lanes with inputs made on the device: the checked sets of a workload whose set is this
  // many bytes or more share their weights (the inputs whose shape has no variable axis: made
  // once per worker) while their activations stay fresh per set; 0: never shared.
  std::uint64_t share_weights_bytes = 1ull << 30;
  // GPU lanes: make the next workloads' inputs on the host (half the cores, lowest priority)
  // while the current one is evaluated. An A/B on one H200 found no effect on the medians'
  // run-to-run spread (docs/benchmarks.md).
  bool prepare_ahead = true;
  // Solutions built ahead of the lanes on this many host threads, in the order the lanes meet
  // them (0: one per core; 1: each built when a lane meets it). CPU lanes start timing once the
  // builds are done, so that no compiler shares the cores with a timed call.
  unsigned build_jobs = 0;
  // Plan the run and build what it would evaluate (on the lanes' architecture sets, sandboxed as
  // its builds are), then stop: no inputs, references or evaluations. `fib serve` builds a
  // submission so, while the task waits in its queue.
  bool build_only = false;
  // Judge each evaluation on a host thread while the lane goes on with the next (up to four at
  // once per lane; traces are still recorded in the order the lane ran them). Unset: on GPU
  // lanes only, since a judge on every core would disturb a CPU lane's timing.
  std::optional<bool> judge_beside;
  bool save_traces = true;
  // Signs every trace of the run, in the orchestrator, once the trace is complete
  // (fib/trace/signature.h); unset: traces are written unsigned. `fib run` always sets it.
  std::optional<SigningKey> signing_key;
  // Entries added to every trace's environment.extra, before it is signed: `fib serve` records
  // the task a trace belongs to, so a restart finds the evaluations already done.
  Json environment_extra = Json::object();
  // What the solutions are checked against: "native" (fib's native reference; definitions
  // without one are left out), "python" (the definition's own PyTorch `reference`, run by
  // python_bridge_dir's run_reference.py) or "auto" (native where it exists, else python).
  ReferenceChoice reference = ReferenceChoice::kAuto;
  std::filesystem::path python_bridge_dir;  // holds run_reference.py
  // On CUDA devices: "events" (CUDA events, the empty event pair's cost subtracted; default),
  // "events-raw" (not subtracted) or "cupti" (kernel activity of every stream).
  GpuTimer gpu_timer = GpuTimer::kEvents;
  // The python3 that runs Python, Triton and torch-extension solutions (--python); empty:
  // $FIB_PYTHON, else the first python3 that imports torch (find_python).
  std::string python;
};

// One finished evaluation, as reported to the progress display.
struct EvaluationEvent {
  std::size_t done = 0, total = 0;
  const Trace* trace = nullptr;
  std::string definition, solution, workload;
};

struct RunCallbacks {
  std::function<void(std::size_t total)> on_start;
  std::function<void(const EvaluationEvent&)> on_evaluation;
  // Non-fatal news: "warning: ...", skipped solutions, reference failures.
  std::function<void(const std::string&)> on_message;
  // What a lane starts now ("building S", "reference on D workload U", "evaluating S on U"),
  // for a live progress line; called from the lanes' threads, one call at a time.
  std::function<void(const std::string&)> on_activity;
};

struct SolutionSummary {
  std::string solution, author;
  std::map<std::string, int> statuses;  // status name -> count
  int workloads = 0, passed = 0;
  double mean_latency_ms = 0;  // over passed workloads
  double geomean_speedup = 0;  // over passed workloads, vs the reference
  int skipped = 0;             // not run after an earlier timeout
};

struct DefinitionSummary {
  std::string definition;
  std::vector<SolutionSummary> solutions;  // ranked: most workloads passed, then speedup
  std::string reference;  // what checked them, as traces name it ("native:gemm", "python")
};

// How many evaluations the run made, found done already, and could not make.
struct RunCounts {
  std::size_t evaluations = 0;  // traces written by this run
  std::size_t resumed = 0;      // already in the dataset, skipped by --resume
  // Workloads whose inputs could not be made or whose reference failed (their evaluations are
  // skipped), and definitions the plan left without a reference.
  std::size_t reference_failures = 0;
  // Records the run would have used that failed to load (skipped, each reported).
  std::size_t broken_records = 0;
  // build_only: the solutions that could not be built (their evaluations would answer at once).
  std::size_t builds_failed = 0;
};

// Where the run's time went, summed over its lanes (seconds).
struct RunTiming {
  double wall_seconds = 0;
  double timed_seconds = 0;  // time inside timed calls (solutions and references)
  double build_seconds = 0;  // building solutions (or finding them in the build cache)
  // Time inside warmup calls (solutions and references): untimed, outside the overhead.
  double warmup_seconds = 0;
  // GPU lanes judge an evaluation beside the next one: the time a lane still waited for a
  // judgement before recording the next trace (the judge ran longer than the next evaluation).
  double judge_wait_seconds = 0;
  // Per evaluation: its wall time minus the time inside the solution's calls (timed and
  // warmup), the worker's one-time load of the workload's input sets, the worker's start and
  // the cache flushes of cold-cache timing (cache_flush_seconds).
  double overhead_seconds = 0;
  // Evicting inputs and outputs from the CPU caches before timed calls: the price of cold-cache
  // timing, about 20 us per MiB a call touches, where the input pool is too small to evict
  // itself by rotation.
  double cache_flush_seconds = 0;
  std::size_t overhead_evaluations = 0;  // evaluations that count in overhead_seconds
};

// Per workload, shared by all its solutions: making and writing the input sets, the reference
// run (less its timed calls) and the workers' loads of the input-set file. On GPU lanes the next
// workload's inputs are made while the current one is evaluated, so only the wait for them
// counts here; inputs_seconds is the host time spent making them, overlapped or not.
struct WorkloadSetup {
  double workload_setup_seconds = 0;
  std::size_t workloads_prepared = 0;
  double inputs_seconds = 0;
  std::size_t inputs_made_ahead = 0;  // workloads whose inputs were ready before their turn
  // Of the setup: the lanes' wait for inputs (all of their making when not made ahead), and the
  // reference workers' whole runs (timed and warmup calls included).
  double inputs_wait_seconds = 0, reference_seconds = 0;
};

// Solution worker processes started (the first, replacements after a crash or timeout, one per
// evaluation with --isolated) and the time to start them, until they answered.
struct WorkerStarts {
  std::size_t starts = 0;
  double start_seconds = 0;
};

// The reference cache's folder (empty: off) and its entries found, not found (absent or
// damaged), found damaged, stored and evicted during the run; a workload whose reference run was
// reused counts its run's entry and its outputs' entries.
struct ReferenceCacheUse {
  std::string dir;
  std::size_t hits = 0, misses = 0, corrupt = 0, stores = 0, evicted = 0;
  std::size_t runs_reused = 0;  // workloads whose reference did not run
};

// What the run ran on.
struct RunEnvironment {
  // Where evaluations ran: {"cpu"} or the CUDA devices, "cuda:0 (NVIDIA H200)", one lane each.
  std::vector<std::string> devices;
  bool gpu = false;
  std::uint64_t seed = 0;
};

struct RunResult {
  std::vector<Trace> traces;  // written by this run, in order
  std::vector<DefinitionSummary> summary;
  std::vector<std::string> messages;
  RunEnvironment environment;
  RunCounts counts;
  RunTiming timing;
  WorkloadSetup setup;
  WorkerStarts workers;
  ReferenceCacheUse reference_cache;
};

// Runs everything the options select. Throws fib::Error for unusable input (no dataset, a bad
// config file, a device this build cannot use); every per-solution failure becomes a trace.
RunResult run_benchmark(const RunOptions& options, const RunCallbacks& callbacks = {});

// The hardware a trace of one device ("cpu", "cuda:N") names (environment.hardware): the CPU
// model, or the GPU's name. Throws fib::Error for a device this build or host lacks.
std::string device_hardware(const std::string& device);

// The summary table of a run, as text.
std::string render_summary(const RunResult& r);
Json summary_to_json(const RunResult& r);

}  // namespace fib::bench
