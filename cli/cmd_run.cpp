// fib run: evaluate every solution of a dataset on every workload of its definition — build,
// run in isolated workers, check against the native reference, time — and append traces.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fib/bench/run/run.h"
#include "fib/dataset/keys.h"
#include "fib/distributed/launch.h"

#ifndef FIB_ABI_INCLUDE_DIR
#define FIB_ABI_INCLUDE_DIR ""
#endif

namespace fib::cli {

namespace {
struct RunArgs {
  std::vector<std::string> local;
  bench::RunOptions options;
  std::optional<int> warmup, iterations, trials;
  std::optional<double> rtol, atol, matched_ratio;
  std::optional<std::string> config;
  std::optional<std::uint64_t> seed;
  std::uint64_t memory_limit_mb = 0;
  std::uint64_t reference_cache_mb = 4096;
  std::uint64_t share_weights_mb = 1024;
  std::string signing_key;
  // The enumerated options as given, parsed into `options` when the command runs.
  std::string reference = "auto", gpu_timer = "events", inputs_on = "device", reference_cache;
  bool json = false;
  bool no_save = false;
  double rank_lost_after = 60;  // seconds without a heartbeat (docs/mpi.md)
};

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

// A live progress line on a terminal (a bar, the ETA, and what a lane is doing now with its
// elapsed time, redrawn every second); one plain line per evaluation otherwise. Quiet with
// --json. Callbacks come from the lanes' threads; the ticker thread redraws between them.
class Progress {
 public:
  explicit Progress(bool quiet) : tty_(::isatty(2) != 0), quiet_(quiet) {}
  ~Progress() { stop(); }
  void start(std::size_t total) {
    std::lock_guard<std::mutex> lock(mu_);
    total_ = total;
    t0_ = activity_t0_ = std::chrono::steady_clock::now();
    if (quiet_) return;
    std::cerr << fmt::format("fib run: {} evaluations to do\n", total);
    if (tty_ && !ticker_.joinable()) ticker_ = std::thread([this] { tick(); });
  }
  void activity(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    activity_ = what;
    activity_t0_ = std::chrono::steady_clock::now();
    if (tty_ && !quiet_) draw();
  }
  void evaluation(const bench::EvaluationEvent& e) {
    if (quiet_) return;
    std::lock_guard<std::mutex> lock(mu_);
    const auto& ev = *e.trace->evaluation;
    std::string what = std::string(status_name(ev.status));
    if (ev.performance) {
      what += fmt::format(" {:.4f} ms ({:.2f}x)", ev.performance->latency_ms,
                          ev.performance->speedup_factor);
    }
    done_ = e.done;
    last_ = fmt::format("{} · {} · {}", e.definition, e.solution, what);
    if (tty_) {
      draw();
      if (e.done == total_) std::cerr << "\n";
    } else {
      std::cerr << fmt::format("[{}/{}] {} {} workload {}: {}\n", e.done, total_, e.definition,
                               e.solution, e.workload.substr(0, 8), what);
    }
  }
  void message(const std::string& m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (tty_) std::cerr << "\r\033[K";
    std::cerr << m << "\n";
    if (tty_ && !quiet_ && total_ > 0) draw();
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (ticker_.joinable()) ticker_.join();
  }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  void tick() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; })) {
      if (done_ < total_) draw();
    }
  }
  // Under mu_.
  void draw() {
    const double elapsed = seconds_since(t0_);
    const std::string eta = done_ > 0 ? format_duration(elapsed / static_cast<double>(done_) *
                                                        static_cast<double>(total_ - done_))
                                      : std::string("?");
    const int width = 28;
    const int filled =
        total_ > 0 ? static_cast<int>(width * static_cast<double>(done_) / total_) : width;
    std::string line = fmt::format("\r\033[K[{}{}] {}/{} ETA {}", std::string(filled, '='),
                                   std::string(width - filled, ' '), done_, total_, eta);
    if (done_ < total_ && !activity_.empty()) {
      line += fmt::format("  {} ({})", activity_, format_duration(seconds_since(activity_t0_)));
    } else if (!last_.empty()) {
      line += "  " + last_;
    }
    std::cerr << line << std::flush;
  }

  bool tty_, quiet_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::thread ticker_;
  bool stopping_ = false;
  std::size_t total_ = 0, done_ = 0;
  std::string activity_, last_;
  std::chrono::steady_clock::time_point t0_, activity_t0_;
};

std::filesystem::path abi_include_dir() {
  if (const char* env = std::getenv("FIB_INCLUDE_DIR")) return env;
  return FIB_ABI_INCLUDE_DIR;
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// One of many ranks (mpirun, srun): rank 0 plans, hands out items and writes every trace; the
// others evaluate on their share of the host's devices (docs/mpi.md).
int run_over_ranks(RunArgs& a, const distributed::Launch& launch, Progress& progress,
                   const bench::RunCallbacks& cb) {
  if (a.local.size() != 1) {
    throw Error("--local", "a run over ranks takes one dataset", "run each in turn");
  }
  std::unique_ptr<distributed::MpiLink> link = distributed::open_mpi();
  if (link->size() != launch.size) {
    throw Error("MPI_COMM_WORLD",
                fmt::format("{} started {} ranks, but MPI sees {}", launch.launcher, launch.size,
                            link->size()),
                "under Slurm, launch with srun --mpi=pmix (or mpirun inside the allocation)");
  }
  bench::RunOptions& o = a.options;
  o.dataset = dataset_path(a.local.front());
  bench::RankSettings settings{.lost_after_seconds = a.rank_lost_after, .host = host_name()};
  if (link->rank() != 0) {
    o.device = distributed::local_device(o.device, link->local_index());
    progress.stop();
    if (bench::run_rank_worker(o, *link, settings)) link->finalize();
    return kExitOk;
  }
  bool all_alive = true;
  const bench::RunResult r = bench::run_coordinator(o, cb, *link, settings, &all_alive);
  progress.stop();
  if (a.json) {
    Json j = bench::summary_to_json(r);
    j["dataset"] = o.dataset.string();
    j["ranks"] = link->size();
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("== fib run --dataset {} ({} ranks)\n", o.dataset.string(),
                             link->size())
              << bench::render_summary(r);
  }
  std::cout << std::flush;
  if (all_alive) link->finalize();  // MPI_Finalize would wait forever on a lost rank
  return r.counts.reference_failures > 0 || r.counts.broken_records > 0 ? kExitFindings : kExitOk;
}

int run_cmd(RunArgs& a) {
  if (a.local.empty()) a.local.push_back(dataset_path(""));
  bench::RunOptions& o = a.options;
  o.reference = bench::parse_reference_choice(a.reference);
  o.gpu_timer = bench::parse_gpu_timer(a.gpu_timer);
  o.inputs_on = bench::parse_inputs_on(a.inputs_on);
  o.reference_cache = bench::parse_reference_cache(a.reference_cache);
  o.cli.warmup_runs = a.warmup;
  o.cli.iterations = a.iterations;
  o.cli.num_trials = a.trials;
  o.cli.rtol = a.rtol;
  o.cli.atol = a.atol;
  o.cli.required_matched_ratio = a.matched_ratio;
  if (a.config) o.config = *a.config;
  o.seed = a.seed;
  o.memory_limit_bytes = a.memory_limit_mb << 20;
  o.reference_cache_bytes = a.reference_cache_mb << 20;
  o.share_weights_bytes = a.share_weights_mb << 20;
  o.save_traces = !a.no_save;
  o.worker_executable = worker_executable();
  o.abi_include_dir = abi_include_dir();
  if (o.abi_include_dir.empty() ||
      !std::filesystem::exists(o.abi_include_dir / "fib" / "solution.h")) {
    throw Error("fib/solution.h", "cannot find the solution ABI header",
                "set FIB_INCLUDE_DIR to the folder holding fib/solution.h (fib's include/)");
  }
  const std::filesystem::path key_path =
      a.signing_key.empty() ? default_signing_key_path() : std::filesystem::path(a.signing_key);
  bool key_created = false;
  o.signing_key = load_or_create_signing_key(key_path, &key_created);
  if (key_created) {
    std::cerr << fmt::format(
        "fib run: made a signing key at {} (key id {}); `fib key show` prints the public key "
        "others need to verify these traces\n",
        key_path.string(), o.signing_key->public_key().key_id().substr(0, 16));
  }
  o.python_bridge_dir = FIB_PYTHON_BRIDGE_DIR;
  Progress progress(a.json);
  bench::RunCallbacks cb;
  cb.on_start = [&](std::size_t n) { progress.start(n); };
  cb.on_evaluation = [&](const bench::EvaluationEvent& e) { progress.evaluation(e); };
  cb.on_message = [&](const std::string& m) { progress.message(m); };
  cb.on_activity = [&](const std::string& what) { progress.activity(what); };
  if (const auto launch =
          distributed::detect_launch([](const char* n) { return std::getenv(n); })) {
    return run_over_ranks(a, *launch, progress, cb);
  }
  Json all = Json::array();
  bool any_failed = false;
  for (const auto& root : a.local) {
    o.dataset = dataset_path(root);
    const bench::RunResult r = bench::run_benchmark(o, cb);
    if (a.json) {
      Json j = bench::summary_to_json(r);
      j["dataset"] = o.dataset.string();
      all.push_back(j);
    } else {
      std::cout << fmt::format("== fib run --dataset {}\n", o.dataset.string())
                << bench::render_summary(r);
    }
    any_failed |= r.counts.reference_failures > 0 || r.counts.broken_records > 0;
  }
  progress.stop();
  if (a.json) std::cout << (all.size() == 1 ? all[0] : all).dump(2) << "\n";
  return any_failed ? kExitFindings : kExitOk;
}
}  // namespace

void register_run(CLI::App& app, Runner& run) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Evaluate solutions on workloads: build, isolate, check, time, write traces");
  add_dataset_option(cmd, a->local, "each is run in turn");
  cmd->add_option("--definitions", a->options.definitions, "Only these definitions")
      ->delimiter(',');
  cmd->add_option("--solutions", a->options.solutions, "Only these solutions")->delimiter(',');
  cmd->add_option("--warmup-runs", a->warmup, "Untimed calls before each trial (default 10)");
  cmd->add_option("--iterations", a->iterations,
                  "Timed calls per trial, at most (default 50; a trial stops early once the "
                  "median is known to 0.5%, see --fixed-iterations)");
  cmd->add_option("--num-trials", a->trials, "Trials, each with fresh checked inputs (default 3)");
  cmd->add_option("--rtol", a->rtol, "Relative tolerance (default 1e-2; overrides --config)");
  cmd->add_option("--atol", a->atol, "Absolute tolerance (default 1e-2; overrides --config)");
  cmd->add_option("--required-matched-ratio", a->matched_ratio,
                  "Share of elements that must match (low-precision ops; default 1, MoE 0.95)");
  cmd->add_option("--timeout", a->options.timeout_seconds,
                  "Seconds one (solution, workload) evaluation may take (default 300)");
  cmd->add_flag("--resume", a->options.resume,
                "Skip (definition, workload, solution) triples that already have a trace");
  cmd->add_flag("--keep-going", a->options.keep_going,
                "Run even when a definition or solution named by --definitions or --solutions is "
                "missing or failed to load (each is a warning; default: exit 2 before running)");
  cmd->add_option("--config", a->config, "Eval config YAML (tolerances per op type/definition)");
  cmd->add_option("--device", a->options.device,
                  "cpu (default), cuda:N, a list cuda:0,cuda:1 or cuda:all (CUDA builds)");
  cmd->add_flag("--isolated", a->options.isolated,
                "A fresh worker process for every evaluation (default: one persistent worker)");
  add_sandbox_option(
      cmd, a->options.sandbox,
      "Workers (solutions' and references') in a bubblewrap sandbox: auto (default: where "
      "it can be made, else a loud warning), required (an error where it cannot), off");
  cmd->add_option("--seed", a->seed,
                  "Seed of all input sets and schedules (default: random, "
                  "recorded in every trace)");
  cmd->add_option("--threads", a->options.threads, "CPU threads per worker (default: all cores)");
  cmd->add_option("--memory-limit-mb", a->memory_limit_mb,
                  "Memory limit per worker: its address space on the CPU (default: half of the "
                  "RAM), its data (RLIMIT_DATA) on CUDA devices (default: none)");
  cmd->add_option("--reference", a->reference,
                  "What checks the solutions: native (fib's native reference), python (the "
                  "definition's PyTorch reference) or auto (default: native where it exists, "
                  "else python)");
  cmd->add_option("--gpu-timer", a->gpu_timer,
                  "On CUDA devices: events (default; the empty event pair's cost subtracted), "
                  "events-raw, or cupti (every kernel of a call, on any stream)");
  cmd->add_option("--inputs-on", a->inputs_on,
                  "On CUDA devices: where the bulk of the inputs (weights, activations, caches) is "
                  "made: device (default; in each worker's device memory) or host (made here and "
                  "copied)")
      ->check(CLI::IsMember({"host", "device"}));
  cmd->add_option("--share-weights-mb", a->share_weights_mb,
                  "On CUDA devices with --inputs-on device: a workload whose input set is this "
                  "large or larger has its checked sets share their weights (inputs with no "
                  "variable axis), activations fresh per set (default 1024; 0: never)");
  cmd->add_option("--build-jobs", a->options.build_jobs,
                  "Solutions built ahead of the evaluations on this many threads (default 0: one "
                  "per core; 1: each when first evaluated). CPU lanes time nothing until the "
                  "builds are done");
  cmd->add_flag("--prepare-ahead,!--no-prepare-ahead", a->options.prepare_ahead,
                "On CUDA devices: make the next workload's inputs while the current one is "
                "evaluated (default on; --no-prepare-ahead: one thing at a time)");
  cmd->add_flag("--fixed-iterations", a->options.fixed_iterations,
                "Always run --iterations timed calls (no noise-based early stop)");
  cmd->add_option("--max-trial-seconds", a->options.max_trial_seconds,
                  "Time cap of one trial's timed calls (default 2)");
  cmd->add_option("--max-warmup-seconds", a->options.max_warmup_seconds,
                  "A trial's warmup ends once its calls took this long, after one call at "
                  "least (default 0.1; 0: always --warmup-runs calls)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--build-cache", a->options.build_cache,
                  "Build cache folder (default: $FIB_CACHE_DIR or ~/.cache/fib/build)");
  cmd->add_option("--reference-cache", a->reference_cache,
                  "Folder of the reference outputs and runs kept across runs, or off (default: "
                  "\"reference\" beside the build cache's folder)");
  cmd->add_option("--reference-cache-mb", a->reference_cache_mb,
                  "Size bound of the reference cache; the least recently used entries go "
                  "(default 4096)");
  cmd->add_flag("--rebuild", a->options.rebuild, "Compile solutions even when the cache has them");
  cmd->add_option("--python", a->options.python,
                  "The python3 (with PyTorch) that runs Python, Triton and torch-extension "
                  "solutions (default: $FIB_PYTHON, else the first python3 that imports torch)");
  cmd->add_flag("--no-save-results", a->no_save, "Do not write traces");
  cmd->add_option("--signing-key", a->signing_key,
                  "Ed25519 key the traces are signed with, made on first use (default: "
                  "$FIB_SIGNING_KEY, else signing-key.pem in $FIB_HOME, $XDG_CONFIG_HOME/fib or "
                  "~/.config/fib)");
  cmd->add_option("--rank-lost-after", a->rank_lost_after,
                  "Under mpirun/srun: seconds without a heartbeat after which a rank is lost and "
                  "its item goes to another (default 60; docs/mpi.md)")
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_flag("--json", a->json, "Print the run summary as JSON (no progress output)");
  cmd->callback([&run, a] { run = [a] { return run_cmd(*a); }; });
}

}  // namespace fib::cli
