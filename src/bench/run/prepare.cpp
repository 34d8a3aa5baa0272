#include "prepare.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "fib/bench/eval/op_family.h"
#include "fib/bench/inputs/input_set_file.h"
#include "fib/bench/reference_stage/reference_cache.h"
#include "fib/tensor/inputs.h"
#include "fib/tensor/random.h"
#include "sandbox.h"
#include "worker_messages.h"

namespace fib::bench::detail {

namespace fs = std::filesystem;

namespace {

// The bytes of a set's tensors, those its deferred fills will make included; with `only`, of
// the inputs it names alone.
std::uint64_t tensor_bytes(const MaterializedInputs& in,
                           const std::vector<std::string>* only = nullptr) {
  const auto counted = [only](const std::string& name) {
    return only == nullptr || std::find(only->begin(), only->end(), name) != only->end();
  };
  std::uint64_t n = 0;
  for (const auto& [k, t] : in.tensors) n += counted(k) ? t.nbytes() : 0;
  for (const auto& [k, fill] : in.deferred) {
    if (!counted(k)) continue;
    std::uint64_t numel = 1;
    for (const std::int64_t d : fill.shape) numel *= static_cast<std::uint64_t>(d);
    n += dtype_storage_bytes(fill.dtype, numel).value_or(0);
  }
  return n;
}

// Every checked set after the first takes the first one's weights (deferred fills only: the
// worker makes each distinct fill once); their digests are taken again. Returns the names.
std::vector<std::string> share_weights(const Definition& def, std::vector<MaterializedInputs>& sets,
                                       std::vector<InputSetDigest>& digests) {
  std::vector<std::string> shared;
  if (sets.size() < 2) return shared;  // one checked set shares nothing
  for (const std::string& name : weight_inputs(def)) {
    const auto first = sets.front().deferred.find(name);
    if (first == sets.front().deferred.end()) continue;
    for (std::size_t k = 1; k < sets.size(); ++k) {
      if (sets[k].deferred.contains(name)) sets[k].deferred[name] = first->second;
    }
    shared.push_back(name);
  }
  for (std::size_t k = 1; k < sets.size() && !shared.empty(); ++k) {
    digests[k] = digest_input_set(sets[k]);
  }
  return shared;
}

// Appends sets [first, first + count) to `sets`, each from its own seed (appended to `seeds`),
// and their checksums and digests to `digests`: made in parallel (random inputs of a large
// workload are hundreds of MiB), stored in order.
void make_input_sets(const Definition& def, const Workload& w, const fs::path& dataset,
                     std::uint64_t base, int first, int count, int max_threads, bool defer,
                     std::vector<MaterializedInputs>& sets, std::vector<std::uint64_t>& seeds,
                     std::vector<InputSetDigest>& digests) {
  const std::size_t at = sets.size();
  sets.resize(at + static_cast<std::size_t>(count));
  digests.resize(at + static_cast<std::size_t>(count));
  std::vector<std::uint64_t> own(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    own[static_cast<std::size_t>(i)] = Rng::derive(base, fmt::format("set{}", first + i));
  }
  std::atomic<int> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int i = next++; i < count; i = next++) {
      try {
        MaterializeOptions mo;
        mo.seed = own[static_cast<std::size_t>(i)];
        mo.dataset_root = dataset;
        // Deferred in either mode: the set's digest (the reference cache's key) takes each bulk
        // fill by its spec, so host-made and device-made sets of one seed share their key.
        mo.defer_bulk_fills = true;
        MaterializedInputs& set = sets[at + static_cast<std::size_t>(i)];
        InputSetDigest& digest = digests[at + static_cast<std::size_t>(i)];
        set = materialize_inputs(def, w, mo);
        digest = digest_input_set(set);
        if (!defer) make_deferred_on_host(set, digest);
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
  seeds.insert(seeds.end(), own.begin(), own.end());
}

// Per trial, warmup calls then timed calls over the pool (sets trials .. trials + pool - 1),
// with the trial's checked set at a position drawn here (the worker learns it only with the
// request; the solution never).
std::vector<TrialCalls> plan_trials(int trials, int pool, int warmup, int iterations,
                                    int min_samples, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TrialCalls> plan;
  int next = 0;
  auto pool_index = [&] { return trials + (next++ % pool); };
  for (int t = 0; t < trials; ++t) {
    TrialCalls calls;
    // Only the first trial warms up (module load, lazy setup, clocks up). Later trials run
    // right after it in the same worker, and every timed call starts from flushed caches
    // anyway, so a warmup call there would change nothing but the wall time.
    const int trial_warmup = t == 0 ? warmup : 0;
    for (int i = 0; i < trial_warmup; ++i) calls.warmup.push_back(pool_index());
    calls.check_position = static_cast<int>(rng() % static_cast<std::uint64_t>(min_samples));
    for (int i = 0; i < iterations; ++i) {
      calls.timed.push_back(i == calls.check_position ? t : pool_index());
    }
    plan.push_back(std::move(calls));
  }
  return plan;
}

}  // namespace

bool inputs_made_on_device(const RunOptions& o, bool gpu) {
  return gpu && o.inputs_on == InputsOn::kDevice;
}

std::vector<std::string> weight_inputs(const Definition& def) {
  std::vector<std::string> names;
  for (const TensorSpec& spec : def.inputs) {
    if (spec.is_scalar() || spec.shape->empty()) continue;
    const bool fixed = std::all_of(spec.shape->begin(), spec.shape->end(), [&](const auto& a) {
      const Axis* axis = def.axis(a);
      return axis != nullptr && axis->kind == AxisKind::kConst;
    });
    if (fixed) names.push_back(spec.name);
  }
  return names;
}

bool shares_weights(std::uint64_t set_bytes, std::uint64_t share_bytes, bool inputs_on_device) {
  return inputs_on_device && share_bytes > 0 && set_bytes >= share_bytes;
}

int pool_sets(std::uint64_t calls, std::uint64_t budget, std::uint64_t pool_set_bytes) {
  const std::uint64_t fit =
      pool_set_bytes > 0 ? std::max<std::uint64_t>(1, budget / pool_set_bytes) : calls;
  return static_cast<int>(std::clamp<std::uint64_t>(std::min(calls, fit), 1, 1024));
}

PreparedWorkload prepare_workload(const PrepareSettings& settings, const Definition& def,
                                  const Workload& w, const fs::path& dir, int max_threads) {
  const RunOptions& o = settings.options;
  PreparedWorkload p;
  p.eval = resolve_eval(settings.builtin, settings.user, o.cli, def, "");
  const ResolvedEval& cfg = p.eval;
  p.dir = dir;
  p.trials = std::max(1, cfg.num_trials);
  p.sampling = samples_draws(def);
  // The sampling family's built-in layer always sets it; a user layer may raise or lower it.
  if (p.sampling) p.sampling_draws = cfg.extra.at("sampling_validation_trials").get<int>();
  fs::create_directories(dir);
  const int warmup = std::max(0, cfg.warmup_runs);
  const int iterations = std::max(1, cfg.iterations);
  const std::uint64_t base = Rng::derive(settings.seed, def.name + "/" + w.uuid);

  std::vector<MaterializedInputs> sets;
  std::vector<InputSetDigest> digests;
  const bool defer = settings.inputs_on_device;
  make_input_sets(def, w, o.dataset, base, 0, p.trials, max_threads, defer, sets, p.set_seeds,
                  digests);
  p.notes = sets.front().notes;
  p.inputs_made = defer ? "device" : "host";
  const std::uint64_t set_bytes = tensor_bytes(sets.front());
  if (shares_weights(set_bytes, o.share_weights_bytes, defer)) {
    p.shared_weights = share_weights(def, sets, digests);
  }
  // Distinct input sets for the unchecked calls too, up to the memory budget, so an output
  // cache keyed on the inputs never hits (and a solution cannot tell checked calls apart).
  const std::uint64_t calls =
      static_cast<std::uint64_t>(p.trials) * static_cast<std::uint64_t>(warmup + iterations - 1);
  // On GPU lanes each worker makes the pool on its device from the checked sets (their
  // floating-point tensors permuted, gpu_checks.h): hundreds of MiB of host-made random inputs
  // per large workload were most of a workload's setup. Their seeds are drawn all the same.
  // A pool set's shared weights are the checked sets' buffers (GpuWorker::sets): held once, with
  // the checked sets, its own bytes are the rest.
  const std::uint64_t pool_budget = settings.gpu ? o.device_pool_bytes : o.input_pool_bytes;
  p.pool = pool_sets(calls, pool_budget, set_bytes - tensor_bytes(sets.front(), &p.shared_weights));
  if (settings.gpu) {
    for (int i = 0; i < p.pool; ++i) {
      p.set_seeds.push_back(Rng::derive(base, fmt::format("set{}", p.trials + i)));
    }
  } else {
    make_input_sets(def, w, o.dataset, base, p.trials, p.pool, max_threads, defer, sets,
                    p.set_seeds, digests);
  }
  p.inputs_file = (dir / "inputs.safetensors").string();
  detail::write_input_sets(p.inputs_file, def, sets, Rng::derive(base, "layout"), digests);
  for (const InputSetDigest& d : digests) p.set_digests.push_back(d.digest);

  const int min_samples = std::min(iterations, 10);
  std::optional<protocol::DevicePool> device_pool;
  if (settings.gpu) {
    device_pool = protocol::DevicePool{p.trials, p.pool, Rng::derive(base, "device_pool")};
  }
  p.schedule = make_schedule(
      plan_trials(p.trials, p.pool, warmup, iterations, min_samples, Rng::derive(base, "schedule")),
      min_samples, o, device_pool);
  if (device_pool) {
    // A device-made set is a function of the checked sets, the pool's seed and its index
    // (gpu_checks.h): that is its content address.
    const std::vector<std::string> checked = p.set_digests;
    for (int i = 0; i < p.pool; ++i) {
      std::vector<std::string> parts{"device-pool/v2", std::to_string(device_pool->seed),
                                     std::to_string(p.trials + i)};
      parts.insert(parts.end(), checked.begin(), checked.end());
      p.set_digests.push_back(content_key(parts));
    }
  }
  return p;
}

}  // namespace fib::bench::detail
