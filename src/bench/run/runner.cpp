#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "bench/run/judge.h"
#include "bench/run/summary.h"
#include "bench/worker/input_sets.h"
#include "fib/bench/build.h"
#include "fib/bench/run.h"
#include "fib/bench/timing.h"
#include "fib/bench/worker.h"
#include "fib/dataset/trace_set.h"
#include "fib/reference/reference.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/random.h"
#include "fib/tensor/safetensors.h"
#include "fib/trace/suggest.h"
#include "fib/version.h"
#ifdef FIB_HAVE_CUDA
#include "fib/cuda/roofline.h"
#include "fib/cuda/runtime.h"
#include "fib/reference_cuda/reference_cuda.h"
#endif

namespace fib::bench {

namespace {
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// ---- Environment ----------------------------------------------------------------------------
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(' '));
        return v;
      }
    }
  }
  return "unknown CPU";
}

std::uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0
             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(size)
             : 0;
}

Json host_json() {
  struct utsname u {};
  ::uname(&u);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return Json{{"host", host},
              {"os", fmt::format("{} {} {}", u.sysname, u.release, u.machine)},
              {"logical_cpus", ::sysconf(_SC_NPROCESSORS_ONLN)},
              {"memory_gib", static_cast<double>(physical_memory()) / (1u << 30)}};
}

std::string iso_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}+00:00", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us % 1000000);
}

// ---- Scratch space -----------------------------------------------------------------------------
// Input sets and checked outputs travel as files in a private folder, on tmpfs when there is
// one; it is removed when the run ends.
class Scratch {
 public:
  Scratch() {
    std::error_code ec;
    fs::path base = fs::exists("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0
                        ? fs::path("/dev/shm")
                        : fs::temp_directory_path();
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      fs::path p = base / fmt::format("fib-run-{}-{:08x}", ::getpid(), rd());
      if (fs::create_directory(p, ec)) {
        fs::permissions(p, fs::perms::owner_all, ec);
        root_ = p;
        return;
      }
    }
    throw Error(base.string(), "cannot create a scratch folder for the run");
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

// ---- Workload preparation
// ------------------------------------------------------------------------
struct PreparedWorkload {
  fs::path dir;
  std::string inputs_file;  // every input set (bench/worker/input_sets.h)
  std::vector<std::uint64_t> set_seeds;
  int trials = 0;
  int pool = 0;
  Json schedule;                               // shared by the reference and every solution
  std::vector<std::string> reference_outputs;  // per trial
  std::vector<std::string> notes;              // input materialization notes
  bool sampling = false;
  ResolvedEval eval;  // the definition-wide settings (trial counts, policy extras)
};

std::uint64_t tensor_bytes(const MaterializedInputs& in) {
  std::uint64_t n = 0;
  for (const auto& [k, t] : in.tensors) n += t.nbytes();
  return n;
}

std::string short_uuid(const std::string& uuid) { return uuid.substr(0, 8); }

// ---- Statistics for traces
// -----------------------------------------------------------------------
struct Timing {
  double latency_ms = 0;  // mean of per-trial medians (upstream's definition)
  Json detail;            // stats over all samples, per-trial medians, raw samples, stop reasons
  double timed_ms = 0;    // sum of all samples
  double warmup_ms = 0;   // time inside the (untimed) warmup calls
  bool ok = false;
};

Timing timing_from_trials(const Json& trials) {
  Timing t;
  std::vector<double> all, medians;
  Json raw = Json::array(), stops = Json::array(), warmups = Json::array(),
       warmup_ms = Json::array();
  for (const Json& tr : trials) {
    const auto s = tr.at("samples_ms").get<std::vector<double>>();
    if (s.empty()) continue;
    medians.push_back(summarize(s).median);
    t.warmup_ms += tr.value("warmup_ms", 0.0);
    warmups.push_back(tr.value("warmup_calls", 0));
    warmup_ms.push_back(tr.value("warmup_ms", 0.0));
    all.insert(all.end(), s.begin(), s.end());
    raw.push_back(s);
    stops.push_back(tr.value("stopped_by", std::string()));
  }
  if (medians.empty()) return t;
  t.ok = true;
  for (double m : medians) t.latency_ms += m;
  t.latency_ms /= static_cast<double>(medians.size());
  for (double x : all) t.timed_ms += x;
  t.detail = stats_to_json(summarize(all));
  t.detail["trial_medians_ms"] = medians;
  t.detail["stopped_by"] = stops;
  t.detail["warmup_calls"] = warmups;
  t.detail["warmup_ms"] = warmup_ms;  // wall time of each trial's warmup calls
  t.detail["samples_ms"] = raw;
  return t;
}

// ---- Devices ------------------------------------------------------------------------------------
// `--device`: "cpu", or CUDA devices "cuda:0,cuda:1" ("cuda" alone: cuda:0, "cuda:all": every
// visible one).
struct DeviceChoice {
  bool gpu = false;
  std::vector<int> cuda;  // ordinals
};

DeviceChoice parse_devices(const std::string& text) {
  DeviceChoice c;
  if (text == "cpu") return c;
  c.gpu = true;
  std::vector<std::string> parts;
  std::string part;
  for (char ch : text + ",") {
    if (ch == ',') {
      if (!part.empty()) parts.push_back(part);
      part.clear();
    } else if (ch != ' ') {
      part += ch;
    }
  }
  auto bad = [&](const std::string& p) {
    return Error("--device", fmt::format("'{}' is not a device", p),
                 "use cpu, cuda:N, a list such as cuda:0,cuda:1, or cuda:all");
  };
  int visible = -1;
  std::string why = "this fib was built without the CUDA path (configure with -DFIB_CUDA=ON)";
#ifdef FIB_HAVE_CUDA
  why.clear();
  visible = cuda::device_count(&why);
#endif
  for (const std::string& p : parts) {
    if (p == "cpu") throw Error("--device", "cpu and CUDA devices cannot be mixed in one run");
    int n = 0;
    if (p == "cuda" || p == "cuda:all") {
      n = 0;  // cuda:all: every visible device, from 0 (checked below)
    } else if (p.rfind("cuda:", 0) == 0) {
      std::size_t used = 0;
      try {
        n = std::stoi(p.substr(5), &used);
      } catch (const std::exception&) {
        throw bad(p);
      }
      if (used != p.size() - 5 || n < 0) throw bad(p);
    } else {
      throw bad(p);
    }
    if (visible < 0) {
      throw Error("--device", fmt::format("device '{}' is not available: {}", p, why),
                  "use --device cpu");
    }
    if (n >= visible) {
      throw Error("--device",
                  visible == 0 ? fmt::format("no CUDA device is visible ({})", why)
                               : fmt::format("{}: only {} CUDA device(s) visible", p, visible),
                  "use --device cpu, or a device below the count nvidia-smi shows");
    }
    for (int d = n; d < (p == "cuda:all" ? visible : n + 1); ++d) {
      if (std::find(c.cuda.begin(), c.cuda.end(), d) == c.cuda.end()) c.cuda.push_back(d);
    }
  }
  if (c.cuda.empty()) throw bad(text);
  return c;
}

// One device's workers: evaluations on a device run one at a time (each timed evaluation has
// the device to itself); devices run in parallel.
struct Lane {
  std::string device;  // "cpu" or "cuda:N"
  std::string hardware;
  Json device_json;  // recorded in traces
  std::vector<std::string> cuda_architectures;
#ifdef FIB_HAVE_CUDA
  cuda::DevicePeaks peaks;  // for the roofline of passed evaluations
#endif
  std::unique_ptr<Worker> solution, reference;
  // GPU lanes: judgements running on the host beside the lane's next evaluations, oldest
  // first. Each records its trace after the one before it, so a lane's traces are recorded in
  // the order it ran them.
  std::deque<std::shared_future<void>> judging;
};

#ifdef FIB_HAVE_CUDA
// What a call must at least do, where the definition says it: the bytes of its inputs (read from
// DRAM: the L2 is flushed before each timed call) for op types that read every input whole, and
// the FLOPs of a GEMM. Other op types read only part of their inputs (paged caches, routed
// experts) and declare nothing.
cuda::RooflineInput roofline_input(const Definition& def, const Workload& w, double median_ms) {
  cuda::RooflineInput in;
  in.median_ms = median_ms;
  const bool whole_inputs = def.op_type == "gemm" || def.op_type == "rmsnorm";
  AxisValues var;
  for (const auto& [k, v] : w.axes) var.emplace_back(k, v);
  const auto bound = def.bind_axes(var);
  if (!bound) return in;
  if (whole_inputs) {
    double bytes = 0;
    for (const auto& spec : def.inputs) {
      if (spec.is_scalar()) continue;
      const auto shape = def.concrete_shape(spec, *bound);
      if (!shape) return in;
      std::uint64_t n = 1;
      for (auto d : *shape) n *= static_cast<std::uint64_t>(d);
      bytes += static_cast<double>(dtype_storage_bytes(spec.dtype, n).value_or(0));
    }
    in.bytes = bytes;
  }
  if (def.op_type == "gemm") {
    const auto m = axis_value(*bound, "M"), n = axis_value(*bound, "N"),
               k = axis_value(*bound, "K");
    if (m && n && k) {
      in.flops = 2.0 * static_cast<double>(*m) * static_cast<double>(*n) * static_cast<double>(*k);
      const DType a = def.inputs.empty() ? DType::kFloat16 : def.inputs.front().dtype;
      in.math = a == DType::kBFloat16  ? cuda::MathKind::kBf16Tensor
                : a == DType::kFloat32 ? cuda::MathKind::kFp32
                : a == DType::kFloat8E4M3FN || a == DType::kFloat8E5M2
                    ? cuda::MathKind::kFp8Tensor
                    : cuda::MathKind::kFp16Tensor;
    }
  }
  return in;
}
#endif

// ---- The run
// ---------------------------------------------------------------------------------------
class Run {
 public:
  Run(const RunOptions& o, const RunCallbacks& cb) : o_(o), cb_(cb) {}

  RunResult go();

 private:
  void message(const std::string& m) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    result_.messages.push_back(m);
    if (cb_.on_message) cb_.on_message(m);
  }
  Worker& solution_worker(Lane& lane);
  Worker& reference_worker(Lane& lane);
  WorkerSpec worker_spec(const std::string& role) const;
  std::optional<PreparedWorkload> prepare(const Definition& def, const Trace& workload,
                                          const fs::path& dir, int max_threads);
  struct WorkItem;
  // A workload's inputs, made by prepare() (or why they could not be).
  struct Prepared {
    std::optional<PreparedWorkload> workload;
    std::string error;
    double seconds = 0;
  };
  Prepared prepare_item(const WorkItem& item, int max_threads);
  // On GPU lanes: starts making item k's inputs on a host thread while the lanes time other
  // work (the GPU does the timed part; the host would otherwise idle). Call with mu_ held.
  void prepare_ahead(const std::vector<WorkItem>& items, std::size_t k);
  std::shared_future<void> ahead_last_;  // the item made ahead last: the next one waits for it
  bool run_reference(Lane& lane, const Definition& def, const Workload& w, PreparedWorkload& p,
                     Timing* timing, std::string* kernel);
  // An evaluation as the lane leaves it: its trace, or (when the worker's outputs must be
  // judged) the judgement that makes it. overhead_ms: the harness's time on the lane outside
  // the solution's calls; -1 when the evaluation did not run to the end.
  struct Evaluated {
    std::optional<Trace> trace;
    std::function<Trace()> judge;
    double overhead_ms = -1;
  };
  // judge_later: leave the judgement to the caller (GPU lanes run it beside the next
  // evaluation); otherwise it is made here and counted in the overhead.
  Evaluated evaluate(Lane& lane, const Definition& def, const Workload& w, const Solution& s,
                     const BuildResult& build, PreparedWorkload& p, const Timing& ref,
                     const std::string& ref_kernel, bool judge_later);
  // Waits until at most `keep` of the lane's judgements are in flight (the oldest first; their
  // traces are then recorded). Rethrows what a judgement threw.
  void settle(Lane& lane, std::size_t keep = 0) {
    while (lane.judging.size() > keep) {
      const auto t0 = Clock::now();
      lane.judging.front().wait();
      {
        std::lock_guard<std::recursive_mutex> lock(mu_);
        result_.judge_wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      }
      const std::shared_future<void> done = std::move(lane.judging.front());
      lane.judging.pop_front();
      done.get();
    }
  }
  // Judgements a lane lets run beside its evaluations: enough that a run of short evaluations
  // does not wait on the judge, few enough not to crowd the host's cores.
  static constexpr std::size_t kJudgementsInFlight = 4;
  Trace make_trace(const Lane& lane, const Definition& def, const Workload& w, const Solution& s,
                   EvaluationStatus status, std::string log, Json env_extra);
  void record(TraceSet& set, Trace t, const Definition& def, const Solution& s);
  void run_item(Lane& lane, TraceSet& set, const WorkItem& item, std::size_t k);

  const RunOptions& o_;
  const RunCallbacks& cb_;
  RunResult result_;
  std::unique_ptr<Scratch> scratch_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  // Guards what lanes share: result_, done_, the build map, timeouts and trace appends.
  std::recursive_mutex mu_;
  std::map<std::string, BuildResult> builds_;
  std::map<std::string, std::string> timed_out_on_;  // solution -> workload uuid
  std::map<std::string, int> skipped_;
  std::size_t workload_index_ = 0;
  BuildOptions build_options_;
  EvalConfigFile builtin_;
  std::optional<EvalConfigFile> user_;
  std::uint64_t seed_ = 0;
  Json host_;
  std::size_t done_ = 0, total_ = 0;
  std::size_t evaluation_counter_ = 0;                  // names scratch files uniquely across lanes
  bool gpu_ = false;                                    // the lanes are CUDA devices
  std::map<std::size_t, std::future<Prepared>> ahead_;  // item index -> its inputs in the making
};

WorkerSpec Run::worker_spec(const std::string& role) const {
  WorkerSpec s;
  s.executable = o_.worker_executable;
  s.role = role;
  // CUDA reserves far more address space than it uses (a context alone reserves tens of GiB),
  // so an address-space limit breaks GPU workers; they run without one.
  s.memory_limit_bytes = gpu_                        ? 0
                         : o_.memory_limit_bytes > 0 ? o_.memory_limit_bytes
                                                     : physical_memory() / 2;
  s.home = scratch_->root();
  s.threads = o_.threads;
  return s;
}

Worker& Run::solution_worker(Lane& lane) {
  if (!lane.solution || !lane.solution->alive()) {
    lane.solution = std::make_unique<Worker>(worker_spec("solution"));
  }
  return *lane.solution;
}

Worker& Run::reference_worker(Lane& lane) {
  if (!lane.reference || !lane.reference->alive()) {
    lane.reference = std::make_unique<Worker>(worker_spec("reference"));
  }
  return *lane.reference;
}

std::optional<PreparedWorkload> Run::prepare(const Definition& def, const Trace& wt,
                                             const fs::path& dir, int max_threads) {
  const Workload& w = wt.workload;
  PreparedWorkload p;
  p.eval = resolve_eval(builtin_, user_ ? &*user_ : nullptr, o_.cli, def, "");
  const ResolvedEval& cfg = p.eval;
  p.dir = dir;
  p.trials = std::max(1, cfg.num_trials);
  p.sampling = def.op_type == "sampling";
  fs::create_directories(dir);
  const int warmup = std::max(0, cfg.warmup_runs);
  const int iterations = std::max(1, cfg.iterations);
  const std::uint64_t base = Rng::derive(seed_, def.name + "/" + w.uuid);

  // Sets [first, first + count), each from its own seed: made in parallel (random inputs of a
  // large workload are hundreds of MiB), stored in order.
  std::vector<MaterializedInputs> sets;
  auto make_sets = [&](int first, int count) {
    const std::size_t at = sets.size();
    sets.resize(at + static_cast<std::size_t>(count));
    std::vector<std::uint64_t> seeds(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      seeds[static_cast<std::size_t>(i)] = Rng::derive(base, fmt::format("set{}", first + i));
    }
    std::atomic<int> next{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
      for (int i = next++; i < count; i = next++) {
        try {
          MaterializeOptions mo;
          mo.seed = seeds[static_cast<std::size_t>(i)];
          mo.dataset_root = o_.dataset;
          sets[at + static_cast<std::size_t>(i)] = materialize_inputs(def, w, mo);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
    };
    const int threads = std::clamp(max_threads, 1, std::min(count, 16));
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
    p.set_seeds.insert(p.set_seeds.end(), seeds.begin(), seeds.end());
  };
  make_sets(0, p.trials);
  p.notes = sets.front().notes;
  const std::uint64_t set_bytes = tensor_bytes(sets.front());
  // Distinct input sets for the unchecked calls too, up to the memory budget, so an output
  // cache keyed on the inputs never hits (and a solution cannot tell checked calls apart).
  const std::uint64_t calls =
      static_cast<std::uint64_t>(p.trials) * static_cast<std::uint64_t>(warmup + iterations - 1);
  // On GPU lanes each worker makes the pool on its device from the checked sets (their
  // floating-point tensors permuted, gpu_checks.h): hundreds of MiB of host-made random inputs
  // per large workload were most of a workload's setup. Their seeds are drawn all the same.
  const std::uint64_t pool_budget = gpu_ ? o_.device_pool_bytes : o_.input_pool_bytes;
  const std::uint64_t budget_sets =
      set_bytes > 0 ? std::max<std::uint64_t>(1, pool_budget / set_bytes) : calls;
  p.pool = static_cast<int>(std::clamp<std::uint64_t>(std::min(calls, budget_sets), 1, 1024));
  if (gpu_) {
    for (int i = 0; i < p.pool; ++i) {
      p.set_seeds.push_back(Rng::derive(base, fmt::format("set{}", p.trials + i)));
    }
  } else {
    make_sets(p.trials, p.pool);
  }
  p.inputs_file = (dir / "inputs.safetensors").string();
  detail::write_input_sets(p.inputs_file, def, sets, Rng::derive(base, "layout"));

  // The schedule: per trial, warmup calls then timed calls over the pool, with the checked set
  // at a position drawn here (the worker learns it only with the request; the solution never).
  std::mt19937_64 rng(Rng::derive(base, "schedule"));
  const int min_samples = std::min(iterations, 10);
  Json trials = Json::array();
  int next = 0;
  auto pool_index = [&] { return p.trials + (next++ % p.pool); };
  for (int t = 0; t < p.trials; ++t) {
    std::vector<int> wu, timed;
    // Only the first trial warms up (module load, lazy setup, clocks up). Later trials run
    // right after it in the same worker, and every timed call starts from flushed caches
    // anyway, so a warmup call there would change nothing but the wall time.
    const int trial_warmup = t == 0 ? warmup : 0;
    for (int i = 0; i < trial_warmup; ++i) wu.push_back(pool_index());
    const int check = static_cast<int>(rng() % static_cast<std::uint64_t>(min_samples));
    for (int i = 0; i < iterations; ++i) timed.push_back(i == check ? t : pool_index());
    trials.push_back(Json{{"warmup", wu},
                          {"timed", timed},
                          {"check_position", check},
                          {"max_seconds", o_.max_trial_seconds},
                          {"max_warmup_seconds", o_.max_warmup_seconds}});
  }
  p.schedule = Json{{"trials", trials},
                    {"min_samples", min_samples},
                    {"rel_precision", 0.005},
                    {"fixed_iterations", o_.fixed_iterations},
                    {"flush_caches", true}};
  if (gpu_) {
    p.schedule["device_pool"] =
        Json{{"first", p.trials}, {"count", p.pool}, {"seed", Rng::derive(base, "device_pool")}};
  }
  return p;
}

Json with_check_outputs(Json schedule, const fs::path& dir, const std::string& who) {
  for (std::size_t t = 0; t < schedule["trials"].size(); ++t) {
    schedule["trials"][t]["check_output"] =
        (dir / fmt::format("{}-trial{}.safetensors", who, t)).string();
  }
  return schedule;
}

bool Run::run_reference(Lane& lane, const Definition& def, const Workload& w, PreparedWorkload& p,
                        Timing* timing, std::string* kernel) {
  AxisValues var;
  Json axes = Json::object();
  for (const auto& [k, v] : w.axes) axes[k] = v;
  const Json schedule = with_check_outputs(p.schedule, p.dir, "reference");
  const Json req{
      {"cmd", "reference"},         {"definition", to_json(def)}, {"var_axes", axes},
      {"sets", p.inputs_file},      {"seeds", p.set_seeds},       {"threads", o_.threads},
      {"eval_extra", p.eval.extra}, {"schedule", schedule},       {"device", lane.device}};
  std::string why;
  Worker::Reply r;
  try {
    r = reference_worker(lane).call(
        req, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(std::max(60.0, o_.timeout_seconds))));
  } catch (const Error& e) {
    why = e.what();
  }
  if (why.empty() && r.kind != Worker::ReplyKind::kOk) {
    why = r.kind == Worker::ReplyKind::kTimeout ? "the reference timed out"
                                                : "the reference worker " + r.died_how;
  }
  if (why.empty() && !r.body.value("ok", false)) why = r.body.value("error", std::string("failed"));
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!why.empty()) {
    if (lane.reference && r.kind == Worker::ReplyKind::kOk) lane.reference->kill();  // fresh next
    ++result_.reference_failures;
    message(
        fmt::format("warning: {} workload {}: reference failed: {}; its evaluations are "
                    "skipped",
                    def.name, short_uuid(w.uuid), why));
    return false;
  }
  *kernel = r.body.value("kernel", std::string());
  *timing = timing_from_trials(r.body.at("trials"));
  result_.timed_seconds += timing->timed_ms / 1000.0;
  result_.warmup_seconds += timing->warmup_ms / 1000.0;
  p.reference_outputs.clear();
  for (const Json& t : schedule["trials"]) p.reference_outputs.push_back(t["check_output"]);
  return true;
}

Trace Run::make_trace(const Lane& lane, const Definition& def, const Workload& w, const Solution& s,
                      EvaluationStatus status, std::string log, Json env_extra) {
  Trace t;
  t.definition = def.name;
  t.workload = w;
  t.solution = s.name;
  Evaluation e;
  e.status = status;
  e.environment.hardware = lane.hardware;
  e.environment.libs = {{"fib", std::string(kVersion)}};
  Json extra = host_;
  extra["device"] = lane.device;
  if (!lane.device_json.is_null()) extra["gpu"] = lane.device_json;
  extra["seed"] = seed_;
  extra["worker"] = o_.isolated ? "isolated" : "persistent";
  for (auto it = env_extra.begin(); it != env_extra.end(); ++it) extra[it.key()] = *it;
  e.environment.extra = extra;
  e.timestamp = iso_timestamp();
  e.log = std::move(log);
  t.evaluation = std::move(e);
  return t;
}

// The signature a solution exports ("TTf>T") against what the definition calls it with.
std::string signature_mismatch(const Definition& def, const Solution& s, const std::string& sig) {
  if (sig.empty()) return {};
  const auto gt = sig.find('>');
  if (gt == std::string::npos) return {};
  const std::size_t params = gt;
  const std::size_t returns = sig.size() - gt - 1;
  const bool dps = s.spec.dps();
  const std::size_t want_params = def.inputs.size() + (dps ? def.outputs.size() : 0);
  const std::size_t want_returns = dps ? 0 : def.outputs.size();
  if (params == want_params && returns == want_returns) return {};
  std::vector<std::string> names;
  for (const auto& i : def.inputs) names.push_back(i.name);
  if (dps) {
    for (const auto& out : def.outputs) names.push_back(out.name);
  }
  return fmt::format(
      "the entry point takes {} parameters and returns {} tensors, but a {} solution of {} is "
      "called with {} ({}) and returns {}",
      params, returns, dps ? "destination-passing" : "value-returning", def.name, want_params,
      fmt::join(names, ", "), want_returns);
}

Run::Evaluated Run::evaluate(Lane& lane, const Definition& def, const Workload& w,
                             const Solution& s, const BuildResult& build, PreparedWorkload& p,
                             const Timing& ref, const std::string& ref_kernel, bool judge_later) {
  const auto t0 = Clock::now();
  const bool gpu = lane.device != "cpu";
  Json env{
      {"timer", gpu ? "CUDA events around each call, queued behind a blocking kernel, the L2 "
                      "flushed (2x its size, write then read) and persisting lines reset before "
                      "each call; the empty event pair's cost subtracted (performance.extra has "
                      "the method per trial)"
                    : "steady_clock around each call (CLOCK_MONOTONIC); inputs and outputs "
                      "evicted from the caches (clflushopt) before every call"},
      {"reference", "native:" + ref_kernel},
      {"reference_threads", o_.threads},
      {"build", Json{{"key", build.key}, {"toolchain", build.toolchain}, {"flags", build.flags}}},
      {"distinct_input_sets", p.trials + p.pool}};
  Json axes = Json::object();
  for (const auto& [k, v] : w.axes) axes[k] = v;
  std::string who;
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    who = fmt::format("solution-{}", done_ + (evaluation_counter_++ << 20));
  }
  const Json schedule = with_check_outputs(p.schedule, p.dir, who);
  Json req{{"cmd", "evaluate"},
           {"definition", to_json(def)},
           {"var_axes", axes},
           {"solution", Json{{"library", build.shared_object.string()},
                             {"symbol", s.spec.entry_symbol()},
                             {"dps", s.spec.dps()}}},
           {"sets", p.inputs_file},
           {"schedule", schedule},
           {"device", lane.device},
           {"gpu_timing", Json{{"timer", o_.gpu_timer}}}};
  std::optional<std::string> sampling_file;
  if (p.sampling) {
    const int draws = p.eval.extra.value("sampling_validation_trials", 100);
    sampling_file = (p.dir / (who + "-draws.safetensors")).string();
    req["sampling"] = Json{{"set", 0}, {"draws", draws}, {"output", *sampling_file}};
  }
  std::string start_error;
  Worker* worker = nullptr;
  // Starting a worker (the first evaluation, after a crash, or every one with --isolated) is
  // counted apart from the evaluation's overhead: worker_start_seconds.
  double worker_start_ms = 0;
  try {
    const bool starting = !lane.solution || !lane.solution->alive() || o_.isolated;
    if (o_.isolated) lane.solution.reset();
    const auto start0 = Clock::now();
    worker = &solution_worker(lane);
    if (starting) {
      worker_start_ms = std::chrono::duration<double, std::milli>(Clock::now() - start0).count();
      std::lock_guard<std::recursive_mutex> lock(mu_);
      result_.worker_start_seconds += worker_start_ms / 1000.0;
      ++result_.worker_starts;
    }
  } catch (const Error& e) {
    start_error = e.what();
  }
  // The worker maps a workload's input sets once, for every solution after it: that load is a
  // per-workload cost (counted in workload_setup_seconds), not this evaluation's overhead.
  double input_load_ms = 0, worker_schedule_ms = 0, cache_flush_ms = 0;
  Evaluated result;
  // The lane's time so far, less the solution's calls: counted now, recorded in the trace's
  // performance.extra once there is one (a PASSED trace).
  auto account = [&](double timed_ms) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    Json extra = Json::object();
    if (timed_ms > 0) {
      result.overhead_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() -
                           timed_ms - input_load_ms - worker_start_ms - cache_flush_ms;
      result_.cache_flush_seconds += cache_flush_ms / 1000.0;
      result_.workload_setup_seconds += input_load_ms / 1000.0;
      extra = Json{
          {"harness_overhead_ms", result.overhead_ms},
          {"input_load_ms", input_load_ms},
          {"worker_start_ms", worker_start_ms},
          // Of the overhead, what the worker spent around the calls (preparing,
          // checking, writing the checked outputs); the rest is messaging and, unless
          // it ran beside the next evaluation, the orchestrator's judgement.
          {"worker_overhead_ms", std::max(0.0, worker_schedule_ms - timed_ms - cache_flush_ms)},
          {"cache_flush_ms", cache_flush_ms}};
    }
    if (o_.isolated) lane.solution.reset();
    return extra;
  };
  auto with_extra = [](Trace t, const Json& extra) {
    if (t.evaluation->performance) {
      for (const auto& [k, v] : extra.items()) t.evaluation->performance->extra[k] = v;
    }
    return t;
  };
  auto finish = [&](Trace t, double timed_ms) {
    result.trace = with_extra(std::move(t), account(timed_ms));
    return std::move(result);
  };
  if (worker == nullptr) {
    return finish(make_trace(lane, def, w, s, EvaluationStatus::kRuntimeError,
                             "the solution worker could not start: " + start_error, env),
                  0);
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(o_.timeout_seconds));
  const Worker::Reply r = worker->call(req, deadline);
  const CapturedOutput out = worker->take_output();
  std::string output_log;
  if (out.total_bytes > 0) {
    output_log = fmt::format(
        "\n--- solution output ({} bytes{}) ---\n{}", out.total_bytes,
        out.total_bytes > out.head.size() + out.tail.size() ? ", head and tail kept" : "",
        out.text());
  }
  if (r.kind == Worker::ReplyKind::kTimeout) {
    return finish(make_trace(lane, def, w, s, EvaluationStatus::kTimeout,
                             fmt::format("no result within the {} s timeout; the worker was "
                                         "killed{}",
                                         o_.timeout_seconds, output_log),
                             env),
                  0);
  }
  if (r.kind == Worker::ReplyKind::kDied) {
    std::string how = r.died_how;
    // The worker's fault handler names an input the solution wrote to (inputs are read-only).
    const std::string said = out.text();
    if (auto at = said.rfind("fib: the solution modified its input"); at != std::string::npos) {
      const auto end = said.find('\n', at);
      const std::string line = said.substr(at + 5, end == std::string::npos ? end : end - at - 5);
      return finish(make_trace(lane, def, w, s, EvaluationStatus::kRuntimeError,
                               fmt::format("{}: the worker was stopped by the fault ({}){}", line,
                                           how, output_log),
                               env),
                    0);
    }
    if (r.signal == 9)
      how +=
          "; a SIGKILL fib did not send usually means the kernel killed it for being out of memory";
    return finish(
        make_trace(lane, def, w, s, EvaluationStatus::kRuntimeError,
                   fmt::format("the worker running the solution {}{}", how, output_log), env),
        0);
  }
  const Json& body = r.body;
  if (body.contains("load_error")) {
    return finish(make_trace(lane, def, w, s, EvaluationStatus::kCompileError,
                             body["load_error"].get<std::string>() + output_log, env),
                  0);
  }
  if (!body.value("ok", false)) {
    return finish(
        make_trace(lane, def, w, s, EvaluationStatus::kRuntimeError,
                   "the worker failed: " + body.value("error", std::string()) + output_log, env),
        0);
  }
  if (const std::string m = signature_mismatch(def, s, body.value("signature", std::string()));
      !m.empty()) {
    return finish(make_trace(lane, def, w, s, EvaluationStatus::kCompileError, m, env), 0);
  }
  input_load_ms = body.value("load_inputs_ms", 0.0);
  worker_schedule_ms = body.value("schedule_ms", 0.0);
  cache_flush_ms = body.value("cache_flush_ms", 0.0);
  const Timing timing = timing_from_trials(body.at("trials"));
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    result_.timed_seconds += timing.timed_ms / 1000.0;
    result_.warmup_seconds += timing.warmup_ms / 1000.0;
  }
  if (body.contains("window_audit")) env["window_audit"] = body["window_audit"];
  if (body.contains("failure")) {
    const Json& f = body["failure"];
    std::string replaced;
    if (body.value("fatal", false)) {
      // A sticky CUDA error: the worker exits after answering; the next evaluation gets a new one.
      worker->kill();
      replaced = "; the worker process was replaced";
    }
    return finish(make_trace(lane, def, w, s, EvaluationStatus::kRuntimeError,
                             fmt::format("call #{}: {}{}{}", f.value("call", 0),
                                         f.value("message", std::string()), replaced, output_log),
                             env),
                  timing.timed_ms + timing.warmup_ms);
  }
  std::vector<detail::CheckedCall> calls;
  const Json& trials = body.at("trials");
  for (std::size_t t = 0; t < trials.size(); ++t) {
    const Json& c = trials[t]["checked"];
    if (c.is_null()) continue;
    detail::CheckedCall cc;
    cc.trial = static_cast<int>(t);
    cc.seed = p.set_seeds.at(t);
    cc.solution_outputs = c.at("file").get<std::string>();
    cc.reference_outputs = p.reference_outputs.at(t);
    cc.inputs = p.inputs_file;
    cc.poison = c.value("poison", Json::object());
    calls.push_back(std::move(cc));
  }
  Json per_trial = Json::array();
  for (const Json& tr : body.at("trials")) per_trial.push_back(tr.value("gpu", Json()));
  // The verdict and the trace: from here on nothing needs the lane's workers or the workload's
  // preparation (the checked-output files stay until the judgement is done).
  auto verdict = [this, &lane, &def, &w, &s, calls = std::move(calls), sampling_file, env,
                  output_log, timing, ref, ref_kernel, gpu, per_trial,
                  phases = body.value("worker_phases_ms", Json::object())]() mutable {
    const auto judge0 = Clock::now();
    const detail::Judgement j =
        detail::judge(def, builtin_, user_ ? &*user_ : nullptr, o_.cli, calls, sampling_file);
    const double judge_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - judge0).count();
    std::string log = j.log;
    if (j.status == EvaluationStatus::kPassed) {
      std::vector<std::string> seeds;
      for (const auto& c : calls) seeds.push_back(std::to_string(c.seed));
      log = fmt::format("passed {} checked calls (input seeds {}) against native:{}{}",
                        calls.size(), fmt::join(seeds, ", "), ref_kernel,
                        sampling_file ? "; sampling distribution check passed" : "");
    }
    Trace trace = make_trace(lane, def, w, s, j.status, log + output_log, env);
    trace.evaluation->correctness = j.correctness;
    if (j.status == EvaluationStatus::kPassed) {
      Performance perf;
      perf.latency_ms = timing.latency_ms;
      perf.reference_latency_ms = ref.latency_ms;
      perf.speedup_factor = timing.latency_ms > 0 ? ref.latency_ms / timing.latency_ms : 0;
      perf.extra = Json{{"method", !gpu                           ? "cpu"
                                   : o_.gpu_timer == "cupti"      ? "cupti"
                                   : o_.gpu_timer == "events-raw" ? "cuda_events_raw"
                                                                  : "cuda_events"},
                        {"solution", timing.detail},
                        {"reference", ref.detail},
                        {"judge_ms", judge_ms}};
      if (gpu) {
#ifdef FIB_HAVE_CUDA
        // Achieved rates against the device's peaks; faster than the hardware allows is flagged.
        const cuda::RooflineInput rin = roofline_input(def, w, timing.latency_ms);
        if (rin.bytes || rin.flops) {
          const cuda::Roofline rl = cuda::roofline(rin, lane.peaks);
          perf.extra["roofline"] = cuda::to_json(rl);
          if (!rl.plausible) {
            message(fmt::format("warning: {} on {} workload {}: {}", s.name, def.name,
                                short_uuid(w.uuid), rl.note));
          }
        }
#endif
        perf.extra["worker_phases_ms"] = phases;
        perf.extra["gpu_timing"] = per_trial;
      }
      trace.evaluation->performance = perf;
    }
    return trace;
  };
  if (!judge_later) return finish(verdict(), timing.timed_ms + timing.warmup_ms);
  const Json extra = account(timing.timed_ms + timing.warmup_ms);
  result.judge = [verdict = std::move(verdict), extra, with_extra]() mutable {
    return with_extra(verdict(), extra);
  };
  return result;
}

void Run::record(TraceSet& set, Trace t, const Definition& def, const Solution& s) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (o_.save_traces) {
    append_traces(set, std::span<const Trace>(&t, 1));
  }
  ++done_;
  ++result_.evaluations;
  result_.traces.push_back(std::move(t));
  if (cb_.on_evaluation) {
    EvaluationEvent e;
    e.done = done_;
    e.total = total_;
    e.trace = &result_.traces.back();
    e.definition = def.name;
    e.solution = s.name;
    e.workload = result_.traces.back().workload.uuid;
    cb_.on_evaluation(e);
  }
}

bool selected(const std::vector<std::string>& allow, const std::string& name) {
  return allow.empty() || std::find(allow.begin(), allow.end(), name) != allow.end();
}

// One (definition, workload) and the solutions still to evaluate on it.
struct Run::WorkItem {
  const Definition* def;
  const Trace* workload;
  std::vector<const Solution*> pending;
};

Run::Prepared Run::prepare_item(const WorkItem& item, int max_threads) {
  fs::path dir;
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    dir = scratch_->root() / fmt::format("w{}", workload_index_++);
  }
  Prepared out;
  const auto t0 = Clock::now();
  try {
    out.workload = prepare(*item.def, *item.workload, dir, max_threads);
  } catch (const Error& e) {
    out.error = e.what();
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

void Run::prepare_ahead(const std::vector<WorkItem>& items, std::size_t k) {
  if (!gpu_ || !o_.prepare_ahead || k >= items.size() || ahead_.count(k)) return;
  // Up to half the host's cores (a workload's checked sets are made one per thread, so three
  // trials use three), at the lowest priority (threads it starts inherit it): the lanes'
  // workers launch and check calls meanwhile and must not wait for a core. Items made ahead
  // are made one after another (each waits for the one before): never more than that at once.
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  auto done = std::make_shared<std::promise<void>>();
  std::shared_future<void> before = ahead_last_;
  ahead_last_ = done->get_future().share();
  ahead_.emplace(k, std::async(std::launch::async, [this, &items, k, threads, before, done] {
                   struct Finish {
                     std::promise<void>& p;
                     ~Finish() { p.set_value(); }
                   } finish{*done};
                   (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
                   if (before.valid()) before.wait();
                   return prepare_item(items[k], threads);
                 }));
}

// On one lane: inputs, the reference, then every pending solution; a lane does one evaluation at
// a time, so a timed call has its device to itself.
void Run::run_item(Lane& lane, TraceSet& set, const WorkItem& item, std::size_t k) {
  const Definition& def = *item.def;
  const Workload& w = item.workload->workload;
  const auto setup0 = Clock::now();
  std::future<Prepared> made_ahead;
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (auto it = ahead_.find(k); it != ahead_.end()) {
      made_ahead = std::move(it->second);
      ahead_.erase(it);
    }
  }
  const bool was_ready = made_ahead.valid() &&
                         made_ahead.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  Prepared prepared =
      made_ahead.valid()
          ? made_ahead.get()
          : prepare_item(item, static_cast<int>(std::thread::hardware_concurrency()));
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    result_.inputs_seconds += prepared.seconds;
    result_.inputs_made_ahead += was_ready ? 1 : 0;
    result_.inputs_wait_seconds += std::chrono::duration<double>(Clock::now() - setup0).count();
  }
  if (!prepared.workload) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    ++result_.reference_failures;
    message(fmt::format("warning: {} workload {}: cannot materialize inputs: {}", def.name,
                        short_uuid(w.uuid), prepared.error));
    done_ += item.pending.size();
    return;
  }
  std::optional<PreparedWorkload>& p = prepared.workload;
  // The workload's folder (inputs, checked outputs) goes once nothing reads it any more: when
  // this item is done and its last judgement, which may run beside the next item, is made.
  struct RemoveWhenDone {
    explicit RemoveWhenDone(fs::path d) : dir(std::move(d)) {}
    RemoveWhenDone(const RemoveWhenDone&) = delete;  // one owner: only the last holder removes
    RemoveWhenDone& operator=(const RemoveWhenDone&) = delete;
    ~RemoveWhenDone() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
    fs::path dir;
  };
  const auto files = std::make_shared<RemoveWhenDone>(p->dir);
  Timing ref;
  std::string kernel;
  const auto reference0 = Clock::now();
  const bool reference_ok = run_reference(lane, def, w, *p, &ref, &kernel);
  {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    result_.reference_seconds += std::chrono::duration<double>(Clock::now() - reference0).count();
  }
  if (!reference_ok) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    done_ += item.pending.size();
    return;
  }
  {
    // Inputs made and written, then the reference run on them: once per workload, shared by
    // every solution (workload_setup_seconds, reported apart from per-evaluation overhead).
    std::lock_guard<std::recursive_mutex> lock(mu_);
    result_.workload_setup_seconds += std::chrono::duration<double>(Clock::now() - setup0).count() -
                                      (ref.timed_ms + ref.warmup_ms) / 1000.0;
    ++result_.workloads_prepared;
  }
  for (const Solution* s : item.pending) {
    const BuildResult* b = nullptr;
    {
      std::unique_lock<std::recursive_mutex> lock(mu_);
      if (auto it = timed_out_on_.find(s->name); it != timed_out_on_.end()) {
        ++skipped_[s->name];
        ++done_;
        message(
            fmt::format("{} on {} workload {}: not run (timed out on workload {} earlier in "
                        "this run); --resume runs it later",
                        s->name, def.name, short_uuid(w.uuid), short_uuid(it->second)));
        continue;
      }
      // Builds are cached per solution and architecture set; one lane builds while the others
      // wait for it (build_solution itself is safe across processes).
      const std::string key =
          s->name + "@" + fmt::format("{}", fmt::join(lane.cuda_architectures, ","));
      auto bit = builds_.find(key);
      if (bit == builds_.end()) {
        BuildOptions bo = build_options_;
        bo.cuda_architectures = lane.cuda_architectures;
        BuildResult built = build_solution(*s, bo);
        result_.build_seconds += built.seconds;
        bit = builds_.emplace(key, std::move(built)).first;
      }
      b = &bit->second;
    }
    if (!b->ok()) {
      record(set,
             make_trace(lane, def, w, *s, EvaluationStatus::kCompileError,
                        fmt::format("{}\n{}", b->message, b->log),
                        Json{{"build", Json{{"key", b->key}, {"toolchain", b->toolchain}}}}),
             def, *s);
      continue;
    }
    // GPU lanes judge on the host while the GPU runs the next evaluation (or the next
    // workload's reference): the judge is host work, and the GPU would otherwise idle.
    Evaluated e = evaluate(lane, def, w, *s, *b, *p, ref, kernel,
                           /*judge_later=*/o_.judge_beside.value_or(gpu_));
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      if (e.overhead_ms >= 0) {  // evaluations that ran to the end (not killed at a deadline)
        result_.overhead_seconds += e.overhead_ms / 1000.0;
        ++result_.overhead_evaluations;
      }
      if (e.trace && e.trace->evaluation->status == EvaluationStatus::kTimeout) {
        timed_out_on_[s->name] = w.uuid;
      }
    }
    if (e.trace) {
      settle(lane);  // the judgements before it first: traces are recorded in the order they ran
      record(set, std::move(*e.trace), def, *s);
      continue;
    }
    settle(lane, kJudgementsInFlight - 1);
    std::shared_future<void> before =
        lane.judging.empty() ? std::shared_future<void>() : lane.judging.back();
    lane.judging.push_back(std::async(std::launch::async, [this, &set, &def, s, before, files,
                                                           judge = std::move(e.judge)] {
                             Trace t = judge();
                             if (before.valid()) before.wait();  // recorded in the order they ran
                             record(set, std::move(t), def, *s);
                           }).share());
  }
}

RunResult Run::go() {
  const auto wall0 = Clock::now();
  const DeviceChoice devices = parse_devices(o_.device);
  if (o_.gpu_timer != "events" && o_.gpu_timer != "events-raw" && o_.gpu_timer != "cupti") {
    throw Error("--gpu-timer", fmt::format("unknown GPU timer '{}'", o_.gpu_timer),
                suggest(o_.gpu_timer, std::vector<std::string>{"events", "events-raw", "cupti"}));
  }
  gpu_ = devices.gpu;
  TraceSet set = TraceSet::load(o_.dataset);
  builtin_ = builtin_eval_config();
  check_eval_settings(o_.cli, "command line");
  if (o_.config) {
    user_ = load_eval_config(*o_.config);
    std::vector<std::string> ops = set.op_types(), names;
    for (const auto& d : set.definitions()) names.push_back(d.value.name);
    for (const auto& d : check_eval_config_names(*user_, ops, names)) {
      message(d.to_string());
    }
  }
  if (o_.seed) {
    seed_ = *o_.seed;
  } else {
    std::random_device rd;
    seed_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  result_.seed = seed_;
  host_ = host_json();
  if (!devices.gpu) {
    auto lane = std::make_unique<Lane>();
    lane->device = "cpu";
    lane->hardware = cpu_model();
    lanes_.push_back(std::move(lane));
  }
#ifdef FIB_HAVE_CUDA
  for (int d : devices.cuda) {
    const cuda::DeviceInfo info = cuda::device_info(d);
    auto lane = std::make_unique<Lane>();
    lane->device = fmt::format("cuda:{}", d);
    lane->hardware = info.name;
    lane->cuda_architectures = {cuda_architecture_for(info.major, info.minor)};
    lane->peaks = cuda::device_peaks(info.name, info.peak_dram_bytes_per_second());
    lane->device_json = Json{{"ordinal", d},
                             {"name", info.name},
                             {"compute_capability", fmt::format("{}.{}", info.major, info.minor)},
                             {"sm_count", info.sm_count},
                             {"l2_bytes", info.l2_bytes},
                             {"memory_bytes", info.global_memory_bytes},
                             {"pci_bus_id", info.pci_bus_id},
                             {"driver_version", info.driver_version},
                             {"runtime_version", info.runtime_version},
                             {"cpu", cpu_model()}};
    lanes_.push_back(std::move(lane));
  }
#endif

  // Unknown names in the allow-lists are warned about, with suggestions.
  std::vector<std::string> def_names, sol_names;
  for (const auto& d : set.definitions()) def_names.push_back(d.value.name);
  for (const auto& d : set.definitions()) {
    for (const auto& s : set.solutions(d.value.name)) sol_names.push_back(s.value.name);
  }
  for (const auto& n : o_.definitions) {
    if (std::find(def_names.begin(), def_names.end(), n) == def_names.end()) {
      message(fmt::format("warning: no definition named '{}' ({})", n, suggest(n, def_names)));
    }
  }
  for (const auto& n : o_.solutions) {
    if (std::find(sol_names.begin(), sol_names.end(), n) == sol_names.end()) {
      message(fmt::format("warning: no solution named '{}' ({})", n, suggest(n, sol_names)));
    }
  }

  // Finished (definition, workload, solution) triples for --resume.
  std::set<std::tuple<std::string, std::string, std::string>> finished;
  if (o_.resume) {
    for (const auto& d : set.definitions()) {
      for (const auto& t : set.traces(d.value.name)) {
        if (t.value.solution) {
          finished.emplace(d.value.name, t.value.workload.uuid, *t.value.solution);
        }
      }
    }
  }

  // Plan: what will run, so the progress display knows the total.
  build_options_.cache_dir = o_.build_cache;
  build_options_.abi_include_dir = o_.abi_include_dir;
  build_options_.force = o_.rebuild;
  std::vector<WorkItem> items;
  for (const auto& d : set.definitions()) {
    const Definition& def = d.value;
    if (!selected(o_.definitions, def.name)) continue;
    std::vector<const Solution*> solutions;
    for (const auto& sr : set.solutions(def.name)) {
      const Solution& s = sr.value;
      if (!selected(o_.solutions, s.name)) continue;
      std::string unsupported, error;
      if (!select_toolchain(s, build_options_, &unsupported, &error) && !unsupported.empty()) {
        message(
            fmt::format("warning: skipping solution {} ({}): {}", s.name, def.name, unsupported));
        continue;
      }
      // A solution runs where its code runs: GPU solutions get device pointers and a stream,
      // CPU ones host memory.
      if (solution_targets_gpu(s) != devices.gpu) {
        message(fmt::format(
            "warning: skipping solution {} ({}): {}", s.name, def.name,
            devices.gpu ? "it targets the CPU (target_hardware cpu); run it with --device cpu"
                        : "it targets a GPU; run it with --device cuda:0 (or a list of devices)"));
        continue;
      }
      solutions.push_back(&s);
    }
    if (solutions.empty()) continue;
    std::string why_no_ref;
    const bool has_reference =
#ifdef FIB_HAVE_CUDA
        devices.gpu ? reference_cuda::find_kernel(def, &why_no_ref) != nullptr :
#endif
                    reference::find_kernel(def, &why_no_ref) != nullptr;
    if (!has_reference) {
      message(
          fmt::format("warning: {} has no native reference{} ({}); its solutions are not "
                      "evaluated",
                      def.name, devices.gpu ? " on CUDA" : "", why_no_ref));
      ++result_.reference_failures;
      continue;
    }
    for (const auto& wr : set.workloads(def.name)) {
      WorkItem item{&def, &wr.value, {}};
      for (const Solution* s : solutions) {
        if (finished.count({def.name, wr.value.workload.uuid, s->name})) {
          ++result_.resumed;
        } else {
          item.pending.push_back(s);
          ++total_;
        }
      }
      if (!item.pending.empty()) items.push_back(std::move(item));
    }
  }
  if (cb_.on_start) cb_.on_start(total_);
  scratch_ = std::make_unique<Scratch>();

  // Work items go to the lanes in order, each lane taking the next when it is free.
  std::size_t next = 0;
  std::exception_ptr failure;
  auto lane_loop = [&](Lane& lane) {
    try {
      while (true) {
        std::size_t k;
        {
          std::lock_guard<std::recursive_mutex> lock(mu_);
          if (next >= items.size() || failure) break;
          k = next++;
          // As many items ahead as there are lanes, plus three: slow workloads (a naive GEMM
          // takes seconds) leave time to make inputs for a run of short ones after them, which
          // a lane gets through faster than one item's inputs are made.
          for (std::size_t a = next; a < next + lanes_.size() + 3; ++a) prepare_ahead(items, a);
        }
        run_item(lane, set, items[k], k);
      }
      settle(lane);
    } catch (...) {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      if (!failure) failure = std::current_exception();
    }
    // After a failure: the judgements in flight still read scratch files and record traces.
    while (!lane.judging.empty()) {
      try {
        settle(lane);
      } catch (...) {
      }
    }
  };
  if (lanes_.size() == 1) {
    lane_loop(*lanes_.front());
  } else {
    std::vector<std::thread> threads;
    for (auto& lane : lanes_) threads.emplace_back(lane_loop, std::ref(*lane));
    for (auto& t : threads) t.join();
  }
  for (auto& [k, f] : ahead_)
    f.wait();  // left over when a lane failed: their files go with scratch
  ahead_.clear();
  for (auto& lane : lanes_) {
    lane->solution.reset();
    lane->reference.reset();
  }
  if (failure) std::rethrow_exception(failure);
  result_.gpu = devices.gpu;
  for (const auto& lane : lanes_) {
    result_.devices.push_back(lane->device == "cpu"
                                  ? lane->device
                                  : fmt::format("{} ({})", lane->device, lane->hardware));
  }
  result_.wall_seconds = std::chrono::duration<double>(Clock::now() - wall0).count();
  result_.summary = detail::summarize_run(result_.traces, set, skipped_);
  return std::move(result_);
}
}  // namespace

RunResult run_benchmark(const RunOptions& options, const RunCallbacks& callbacks) {
  Run run(options, callbacks);
  return run.go();
}

}  // namespace fib::bench
