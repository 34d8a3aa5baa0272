// The worker's CUDA path (`evaluate` and `reference` requests with "device": "cuda:N"): the
// workload's input sets copied to the device once, solutions called with device pointers and
// the worker's stream, timed by fib::cuda::Timer (L2 flush, blocking kernel, events), and after
// every call, outside the timed window, one check kernel: every input's hash against its hash
// at upload (inputs are read-only) and every output's guard regions. The checked call's outputs
// are copied aside on the stream, so nothing later overwrites them. After the trials, a window
// audit under CUPTI checks that each call's kernels ran inside the call's window on the stream
// (work left on a side stream escapes it). A sticky CUDA error (an illegal address) makes the
// worker answer and exit: its context is unusable, and the orchestrator starts a new one.
#ifdef FIB_HAVE_CUDA

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>

#include "bench/worker/checked_writer.h"
#include "bench/worker/device_pool.h"
#include "bench/worker/gpu_checks.h"
#include "bench/worker/worker_common.h"
#include "fib/bench/compare.h"
#include "fib/bench/timing.h"
#include "fib/cuda/runtime.h"
#include "fib/cuda/timing.h"
#include "fib/reference_cuda/reference_cuda.h"
#include "fib/tensor/safetensors.h"

namespace fib::bench::detail {

namespace cu = fib::cuda;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Raw device bytes (a DeviceTensor of uint8).
cu::DeviceTensor device_bytes(std::size_t n) {
  return cu::DeviceTensor(DType::kUInt8, {static_cast<std::int64_t>(n)});
}

// The solution returned an error (or threw): the message it gave.
struct SolutionFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A value-returning solution returned memory fib::allocate did not hand out.
struct ResultsFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

// ---- Device state of a worker -----------------------------------------------------------------
// One input set on the device, with the table the check kernel hashes.
struct DeviceSet {
  reference_cuda::DeviceArguments args;  // tensors on the device, scalars on the host
  std::vector<std::string> names;        // inputs in check-table order
  cu::DeviceTensor table, chunk_starts, partial;
  unsigned long long total_chunks = 0;
};

class GpuWorker {
 public:
  explicit GpuWorker(int device) : device_(device) {
    cu::set_device(device);
    cu::enable_allocation_cache();  // no cudaMalloc/cudaFree (which synchronize) between calls
    stream_ = std::make_unique<cu::Stream>();
    timer_ = std::make_unique<cu::Timer>(device, stream_->get());
    writer_ = std::make_unique<CheckedOutputWriter>(device);
    counter_ = device_bytes(sizeof(unsigned int));
    failure_ = device_bytes(sizeof(gpu::CheckFailure));
    FIB_CUDA_CHECK(cudaMemsetAsync(counter_.raw(), 0, counter_.nbytes(), stream_->get()));
    clear_failure();
  }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_->get(); }
  cu::Timer& timer() { return *timer_; }
  // Writes checked outputs while the next trial runs (its staging memory kept across requests).
  CheckedOutputWriter& writer() { return *writer_; }

  // The device copies of `host` (uploaded when the workload changes, or after a solution
  // modified one), then the pool's sets made from them on the device, with their hashes.
  const std::vector<DeviceSet>& sets(const std::string& path, const InputSets& host,
                                     const DevicePool& pool, double* upload_ms) {
    *upload_ms = 0;
    if (path == sets_path_ && pool == sets_pool_ && !sets_dirty_ && !sets_.empty()) return sets_;
    if (pool.count > 0 && static_cast<std::size_t>(pool.first) != host->size()) {
      throw Error("request.schedule.device_pool.first",
                  fmt::format("{}, but the input-set file holds {} sets (the pool follows them)",
                              pool.first, host->size()));
    }
    const auto t0 = Clock::now();
    sets_.clear();
    sets_path_.clear();
    for (const InputSet& in : *host) {
      DeviceSet d;
      d.args.scalars = in.scalars;
      for (const auto& [name, t] : in.tensors) {
        d.names.push_back(name);
        d.args.tensors.emplace(name, cu::to_device(t, stream()));
      }
      sets_.push_back(finish_set(std::move(d)));
    }
    for (int j = 0; j < pool.count; ++j) {
      const DeviceSet& from = sets_.at(static_cast<std::size_t>(j) % host->size());
      DeviceSet d;
      d.args.scalars = from.args.scalars;
      for (std::size_t k = 0; k < from.names.size(); ++k) {
        const cu::DeviceTensor& src = from.args.tensors.at(from.names[k]);
        cu::DeviceTensor dst(src.dtype(), src.shape());
        const PoolPermutation how = pool_permutation(src.dtype(), src.shape(), pool.seed,
                                                     pool.first + j, static_cast<int>(k));
        if (how.permuted) {
          gpu::launch_permute(src.raw(), dst.raw(), how.rows, how.middle, how.cols, how.unit,
                              stream());
        } else if (src.nbytes() > 0) {
          FIB_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(),
                                         cudaMemcpyDeviceToDevice, stream()));
        }
        d.names.push_back(from.names[k]);
        d.args.tensors.emplace(from.names[k], std::move(dst));
      }
      sets_.push_back(finish_set(std::move(d)));
    }
    FIB_CUDA_CHECK(cudaStreamSynchronize(stream()));
    sets_path_ = path;
    sets_pool_ = pool;
    sets_dirty_ = false;
    *upload_ms = ms_since(t0);
    return sets_;
  }
  // Sets [0, file_sets) came from the file (the host holds them); the rest were made here.
  std::size_t file_sets() const {
    return sets_.size() - static_cast<std::size_t>(sets_pool_.count);
  }
  void mark_sets_dirty() { sets_dirty_ = true; }

  gpu::CheckPlan plan(const DeviceSet& d, const std::vector<gpu::GuardRegion>& guards) {
    gpu::CheckPlan p;
    p.inputs = static_cast<gpu::CheckedInput*>(d.table.raw());
    p.num_inputs = static_cast<int>(d.names.size());
    p.chunk_starts = static_cast<unsigned long long*>(d.chunk_starts.raw());
    p.total_chunks = d.total_chunks;
    p.partial = static_cast<unsigned long long*>(d.partial.raw());
    p.counter = static_cast<unsigned int*>(counter_.raw());
    p.num_guards = static_cast<int>(std::min<std::size_t>(guards.size(), gpu::kMaxGuards));
    for (int i = 0; i < p.num_guards; ++i) p.guards[i] = guards[static_cast<std::size_t>(i)];
    p.failure = static_cast<gpu::CheckFailure*>(failure_.raw());
    p.max_blocks = 4 * timer_->device().sm_count;
    return p;
  }

  // The first failure the check kernel recorded since clear_failure() (synchronizes).
  gpu::CheckFailure take_failure() {
    gpu::CheckFailure f{};
    FIB_CUDA_CHECK(cudaMemcpyAsync(&f, failure_.raw(), sizeof f, cudaMemcpyDeviceToHost, stream()));
    FIB_CUDA_CHECK(cudaStreamSynchronize(stream()));
    clear_failure();
    return f;
  }

  // The check table of a set whose tensors are on the device (in d.names order), and its
  // inputs' hashes, stored as the expected ones.
  DeviceSet finish_set(DeviceSet d) {
    std::vector<gpu::CheckedInput> table;
    std::vector<unsigned long long> starts{0};
    for (const std::string& name : d.names) {
      const cu::DeviceTensor& dt = d.args.tensors.at(name);
      table.push_back({dt.raw(), static_cast<unsigned long long>(dt.nbytes()), 0});
      starts.push_back(starts.back() +
                       (dt.nbytes() + gpu::kHashChunkBytes - 1) / gpu::kHashChunkBytes);
    }
    d.total_chunks = starts.back();
    d.table = upload(table.data(), table.size() * sizeof(gpu::CheckedInput));
    d.chunk_starts = upload(starts.data(), starts.size() * sizeof(unsigned long long));
    d.partial = device_bytes(std::max<std::size_t>(1, table.size()) * sizeof(unsigned long long));
    FIB_CUDA_CHECK(cudaMemsetAsync(d.partial.raw(), 0, d.partial.nbytes(), stream()));
    gpu::launch_check(plan(d, {}), 0, /*store_expected=*/true, stream());
    return d;
  }

  cu::DeviceTensor upload(const void* data, std::size_t bytes) {
    cu::DeviceTensor t = device_bytes(std::max<std::size_t>(bytes, 1));
    FIB_CUDA_CHECK(cudaMemcpyAsync(t.raw(), data, bytes, cudaMemcpyHostToDevice, stream()));
    FIB_CUDA_CHECK(cudaStreamSynchronize(stream()));
    return t;
  }

 private:
  void clear_failure() {
    FIB_CUDA_CHECK(cudaMemsetAsync(failure_.raw(), 0, failure_.nbytes(), stream()));
  }

  int device_;
  std::unique_ptr<cu::Stream> stream_;
  std::unique_ptr<cu::Timer> timer_;
  std::unique_ptr<CheckedOutputWriter> writer_;
  cu::DeviceTensor counter_, failure_;
  std::string sets_path_;
  DevicePool sets_pool_;
  bool sets_dirty_ = false;
  std::vector<DeviceSet> sets_;
};

namespace {

int parse_device(const std::string& device) {
  // "cuda:N" (or "cuda": device 0)
  if (device == "cuda") return 0;
  try {
    std::size_t used = 0;
    const int n = std::stoi(device.substr(5), &used);
    if (used == device.size() - 5 && n >= 0) return n;
  } catch (const std::exception&) {
  }
  throw Error("request.device", fmt::format("'{}' is not a CUDA device (cuda:N)", device));
}

GpuWorker& gpu_state(WorkerState& st, const Json& req) {
  const int device = parse_device(req.value("device", std::string("cuda:0")));
  if (!st.gpu) {
    std::string why;
    if (cu::device_count(&why) <= device) {
      throw Error("request.device",
                  fmt::format("no CUDA device {} ({})", device, why.empty() ? "not visible" : why));
    }
    st.gpu = std::make_shared<GpuWorker>(device);
  } else if (st.gpu->device() != device) {
    throw Error("request.device",
                fmt::format("this worker serves cuda:{}, not cuda:{}", st.gpu->device(), device));
  }
  return *st.gpu;
}

// Output storage with guard regions on the device.
struct DeviceOutput {
  DType dtype;
  Shape shape;
  std::size_t bytes = 0;
  cu::DeviceTensor storage;  // guard, data, guard
  std::byte* data = nullptr;

  DeviceOutput(DType d, Shape s, cudaStream_t stream) : dtype(d), shape(std::move(s)) {
    std::uint64_t numel = 1;
    for (auto x : shape) numel *= static_cast<std::uint64_t>(x);
    bytes = static_cast<std::size_t>(dtype_storage_bytes(dtype, numel).value_or(0));
    storage = device_bytes(bytes + 2 * gpu::kGuardBytes);
    data = static_cast<std::byte*>(storage.raw()) + gpu::kGuardBytes;
    FIB_CUDA_CHECK(cudaMemsetAsync(storage.raw(), gpu::kGuardByte, storage.nbytes(), stream));
  }
  gpu::GuardRegion guards() const {
    return {reinterpret_cast<const unsigned char*>(data) - gpu::kGuardBytes,
            reinterpret_cast<const unsigned char*>(data) + bytes};
  }
};

std::string stop_name(cu::StopReason r) {
  switch (r) {
    case cu::StopReason::kNoise:
      return "noise";
    case cu::StopReason::kTimeCap:
      return "time_cap";
    case cu::StopReason::kIterationCap:
      return "iterations";
  }
  return "iterations";
}

// The sets a trial's calls use, in order: warmup first (in the first trial at least one: module
// loading belongs there), then the timed ones, cycled if calls are redone.
struct CallOrder {
  std::vector<int> warmup, timed;
  int check_set = -1;
  bool warm = false;  // a later trial: its calls follow the first trial's on this stream
  int set_for(std::size_t i) const {
    if (i < warmup.size()) return warmup[i];
    return timed[(i - warmup.size()) % timed.size()];
  }
};

CallOrder order_of(const TrialPlan& plan, bool first_trial) {
  CallOrder o;
  o.warmup = plan.warmup;
  o.timed = plan.timed;
  if (plan.check_position >= 0 && plan.check_position < static_cast<int>(plan.timed.size())) {
    o.check_set = plan.timed[static_cast<std::size_t>(plan.check_position)];
  }
  o.warm = !first_trial;
  if (o.warmup.empty() && !o.warm) {
    for (int s : o.timed) {
      if (s != o.check_set) {
        o.warmup.push_back(s);
        break;
      }
    }
    if (o.warmup.empty()) o.warmup.push_back(o.timed.front());
  }
  return o;
}

cu::TimingOptions timing_options(const Schedule& s, const TrialPlan& plan, const CallOrder& order,
                                 const Json& req) {
  cu::TimingOptions o;
  const Json gt = req.value("gpu_timing", Json::object());
  const std::string timer = gt.value("timer", std::string("events"));
  // "events": CUDA events, the empty pair's cost subtracted; "events-raw": not subtracted;
  // "cupti": every kernel the call launches, on any stream, from CUPTI's activity records.
  if (timer == "cupti") {
    o.mode = cu::TimingMode::kCupti;
  } else if (timer != "events" && timer != "events-raw") {
    throw Error("request.gpu_timing.timer", fmt::format("unknown GPU timer '{}'", timer));
  }
  o.subtract_event_overhead = timer == "events";
  o.warmup = static_cast<int>(order.warmup.size());
  o.warm = order.warm;
  o.max_warmup_seconds = plan.max_warmup_seconds;
  o.max_iterations = plan.timed.size();
  o.max_seconds = plan.max_seconds > 0 ? plan.max_seconds : 1e9;
  o.l2_flush = s.flush_caches;
  const std::size_t must_reach =
      std::max<std::size_t>(s.noise.min_samples, static_cast<std::size_t>(plan.check_position + 1));
  if (!s.fixed_iterations) {
    const NoiseCriterion noise = s.noise;
    o.stop = [noise, must_reach](std::span<const double> samples) {
      return samples.size() >= must_reach && precise_enough(samples, noise);
    };
  }
  return o;
}

Json timing_json(const cu::TimingResult& r) {
  Json j = cu::to_json(r);
  j.erase("samples_ms");  // the trial's samples_ms holds them
  return j;
}

// One trial of the reply, for the solution and the reference alike.
Json trial_json(const cu::TimingResult& r, Json checked) {
  return Json{{"samples_ms", r.samples_ms},      {"warmup_ms", 1000.0 * r.method.warmup_seconds},
              {"warmup_calls", r.method.warmup}, {"stopped_by", stop_name(r.method.stop)},
              {"checked", std::move(checked)},   {"gpu", timing_json(r)}};
}

// What a CUDA error during a measurement means for the evaluation.
Failure cuda_failure(const cu::CudaError& e, std::uint64_t call, WorkerState& st) {
  Failure f;
  f.kind = "cuda_error";
  f.call = call;
  f.message = e.what();
  if (dynamic_cast<const cu::StickyError*>(&e) != nullptr) {
    st.exit_after_reply = true;
    f.message += " (a sticky error: the CUDA context is unusable, the worker is replaced)";
  }
  return f;
}

}  // namespace

// ---- A solution on the device -----------------------------------------------------------------
Json gpu_evaluate(WorkerState& st, const Json& req) {
  const Definition def = parse_definition(req.at("definition"));
  const AxisValues var = parse_axes(req.at("var_axes"));
  const Json& sol = req.at("solution");
  std::string error;
  GpuWorker& g = gpu_state(st, req);
  const LoadedLibrary lib = load_library(st, sol.at("library").get<std::string>(),
                                         sol.at("symbol").get<std::string>(), &error);
  if (lib.entry == nullptr) return Json{{"ok", false}, {"load_error", error}};
  const bool dps = sol.value("dps", true);
  if (lib.cuda_get_last_error) (void)lib.cuda_get_last_error();  // nothing stale from before
  const cudaStream_t stream = g.stream();
  double upload_ms = 0;
  const std::string sets_path = req.at("sets").get<std::string>();
  const InputSets host = load_sets(st, req.at("sets"));
  const Schedule schedule = parse_schedule(req.at("schedule"));
  const std::vector<DeviceSet>& sets = g.sets(sets_path, host, schedule.device_pool, &upload_ms);

  const auto bound = def.bind_axes(var);
  if (!bound) throw Error("request", "the workload does not bind every var axis");
  // Destination-passing: the outputs, allocated here. Value-returning: device buffers handed
  // out by fib::allocate, reused by position from call to call (so only the first call
  // allocates), poisoned before every call and guarded the same way.
  if (dps && def.outputs.size() > static_cast<std::size_t>(gpu::kMaxGuards)) {
    throw Error("request", fmt::format("the definition has {} outputs; the CUDA worker guards at "
                                       "most {}",
                                       def.outputs.size(), gpu::kMaxGuards));
  }
  std::vector<Shape> expected_shapes;
  std::vector<DeviceOutput> outputs;
  for (const auto& spec : def.outputs) {
    const auto shape = def.concrete_shape(spec, *bound);
    if (!shape) throw Error("request", fmt::format("cannot size output '{}'", spec.name));
    expected_shapes.push_back(*shape);
    if (dps) outputs.emplace_back(spec.dtype, *shape, stream);
  }
  std::vector<std::unique_ptr<DeviceOutput>> allocations;
  std::size_t allocated = 0, allocated_last_call = 0;
  std::vector<fib_tensor> results(def.outputs.size() + 1);
  // The guarded buffers of the current call: the outputs, or this call's allocations.
  auto guard_list = [&] {
    std::vector<gpu::GuardRegion> list;
    if (dps) {
      for (const auto& o : outputs) list.push_back(o.guards());
    } else {
      for (std::size_t k = 0; k < allocated; ++k) list.push_back(allocations[k]->guards());
    }
    return list;
  };

  // The arguments of a call on set k: device views of its inputs, then the outputs.
  auto args_for = [&](int k) {
    const DeviceSet& d = sets.at(static_cast<std::size_t>(k));
    std::vector<fib_value> args;
    for (const auto& spec : def.inputs) {
      fib_value v{};
      if (spec.is_scalar()) {
        v = scalar_value(spec, d.args.scalars);
      } else {
        auto it = d.args.tensors.find(spec.name);
        if (it == d.args.tensors.end()) {
          v.kind = FIB_VALUE_ABSENT;
        } else {
          v.kind = FIB_VALUE_TENSOR;
          v.tensor = contiguous_view(it->second.raw(), it->second.dtype(), it->second.shape(),
                                     FIB_DEVICE_CUDA, g.device());
        }
      }
      args.push_back(v);
    }
    for (auto& o : outputs) {
      fib_value v{};
      v.kind = FIB_VALUE_TENSOR;
      v.tensor = contiguous_view(o.data, o.dtype, o.shape, FIB_DEVICE_CUDA, g.device());
      args.push_back(v);
    }
    return args;
  };
  std::map<int, std::vector<fib_value>> arg_cache;
  auto args_of = [&](int k) -> const std::vector<fib_value>& {
    auto it = arg_cache.find(k);
    if (it == arg_cache.end()) it = arg_cache.emplace(k, args_for(k)).first;
    return it->second;
  };

  // Per-call state shared by the hooks and the call (all on this thread, in enqueue order).
  std::uint64_t call_number = 0;  // across trials: the poison changes from call to call
  int current_set = 0;
  std::map<std::string, std::int64_t> poison;  // integer sentinels of the current call
  char error_text[4096] = {};
  const CallOrder* order = nullptr;
  std::vector<cu::DeviceTensor> staged;      // the checked call's outputs, copied aside
  std::vector<DeviceOutputRef> staged_meta;  // those copies, with dtypes and shapes as returned
  bool staged_done = false;
  std::uint64_t staged_call = 0;
  Json staged_poison = Json::object();

  auto before = [&](cudaStream_t s, std::size_t i) {
    current_set = order ? order->set_for(i) : current_set;
    poison.clear();
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      const Poison p = poison_for(outputs[o].dtype, call_number);
      gpu::launch_fill(outputs[o].data, outputs[o].bytes, p.pattern, p.width, s);
    }
    // The buffers the last call was given come back, in order, to this one: poison them now.
    for (std::size_t k = 0; k < allocated_last_call && k < allocations.size(); ++k) {
      const Poison p = poison_for(allocations[k]->dtype, call_number);
      gpu::launch_fill(allocations[k]->data, allocations[k]->bytes, p.pattern, p.width, s);
    }
    allocated = 0;
    for (const auto& spec : def.outputs) {
      if (dtype_is_integer(spec.dtype) || spec.dtype == DType::kBool ||
          spec.dtype == DType::kFloat4E2M1) {
        poison[spec.name] = poison_for(spec.dtype, call_number).sentinel;
      }
    }
  };
  struct Allocator {  // fib::allocate's callback, bound to this evaluation
    std::function<int(std::int32_t, const std::int64_t*, std::int32_t, fib_tensor*)> fn;
    static int thunk(void* ctx, std::int32_t dtype, const std::int64_t* shape, std::int32_t ndim,
                     fib_tensor* out) {
      return static_cast<Allocator*>(ctx)->fn(dtype, shape, ndim, out);
    }
  } allocate;
  allocate.fn = [&](std::int32_t dtype, const std::int64_t* shape, std::int32_t ndim,
                    fib_tensor* out) -> int {
    if (dtype < 0 || dtype > FIB_DTYPE_BOOL || ndim < 0 || ndim > FIB_MAX_RANK) return 1;
    Shape sh(shape, shape + ndim);
    for (auto d : sh) {
      if (d < 0) return 1;
    }
    const auto dt = static_cast<DType>(dtype);
    try {
      if (allocated >= allocations.size() || allocations[allocated]->dtype != dt ||
          allocations[allocated]->shape != sh) {
        // New (the first call, or a different request at this position): allocated and
        // poisoned now, on the stream, ahead of the solution's work.
        auto b = std::make_unique<DeviceOutput>(dt, sh, stream);
        const Poison p = poison_for(dt, call_number);
        gpu::launch_fill(b->data, b->bytes, p.pattern, p.width, stream);
        if (allocated < allocations.size()) {
          allocations[allocated] = std::move(b);
        } else {
          allocations.push_back(std::move(b));
        }
      }
    } catch (const std::exception&) {
      return 1;  // the solution's fib::allocate throws std::bad_alloc
    }
    const DeviceOutput& b = *allocations[allocated++];
    *out = contiguous_view(b.data, b.dtype, b.shape, FIB_DEVICE_CUDA, g.device());
    return 0;
  };
  const fib_allocator allocator{&allocate, &Allocator::thunk};
  // Where output o of the current call is: its buffer, dtype and shape as the solution gave it.
  struct Produced {
    const void* data;
    DType dtype;
    Shape shape;
    std::size_t bytes;
  };
  auto produced = [&](std::size_t o) -> Produced {
    if (dps) return {outputs[o].data, outputs[o].dtype, outputs[o].shape, outputs[o].bytes};
    const fib_tensor& r = results[o];
    Shape sh(r.shape, r.shape + r.ndim);
    std::uint64_t numel = 1;
    for (auto d : sh) numel *= static_cast<std::uint64_t>(d);
    const auto dt = static_cast<DType>(r.dtype);
    return {r.data, dt, sh, static_cast<std::size_t>(dtype_storage_bytes(dt, numel).value_or(0))};
  };
  auto call = [&](cudaStream_t s) {
    const std::vector<fib_value>& args = args_of(current_set);
    error_text[0] = '\0';
    fib_call c{};
    c.abi_version = FIB_SOLUTION_ABI_VERSION;
    c.destination_passing = dps ? 1 : 0;
    c.args = args.data();
    c.num_args = static_cast<std::int32_t>(args.size());
    results.assign(results.size(), fib_tensor{});
    c.results = results.data();
    c.num_results = static_cast<std::int32_t>(results.size());
    c.allocator = &allocator;
    c.stream = s;
    c.error = error_text;
    c.error_capacity = sizeof error_text;
    const int rc = lib.entry(&c);
    if (rc != 0) {
      throw SolutionFailed(error_text[0] ? std::string(error_text)
                                         : fmt::format("returned {}", rc));
    }
  };
  auto after = [&](cudaStream_t s, std::size_t) {
    // A launch error the solution left unchecked (a bad configuration) is this call's. It is
    // recorded by the runtime the solution links, and by fib's own when the solution uses it.
    int launch = lib.cuda_get_last_error ? lib.cuda_get_last_error() : 0;
    const char* name = launch != 0 && lib.cuda_error_name ? lib.cuda_error_name(launch) : nullptr;
    const char* text =
        launch != 0 && lib.cuda_error_string ? lib.cuda_error_string(launch) : nullptr;
    if (launch == 0) {
      launch = static_cast<int>(cudaGetLastError());
      name = cudaGetErrorName(static_cast<cudaError_t>(launch));
      text = cudaGetErrorString(static_cast<cudaError_t>(launch));
    }
    if (launch != 0) {
      const std::string m = fmt::format("a kernel launch of the solution failed: {} ({})",
                                        name ? name : "?", text ? text : "?");
      if (cu::is_sticky(launch)) throw cu::StickyError(launch, m);
      throw cu::CudaError(launch, m);
    }
    allocated_last_call = allocated;
    if (!dps) {
      if (allocated > static_cast<std::size_t>(gpu::kMaxGuards)) {
        throw SolutionFailed(
            fmt::format("{} fib::allocate calls in one call; fib guards at most {}", allocated,
                        gpu::kMaxGuards));
      }
      // Every result must be memory fib::allocate handed out during this call.
      for (std::size_t o = 0; o < def.outputs.size(); ++o) {
        bool ours = false;
        for (std::size_t k = 0; k < allocated; ++k) ours |= results[o].data == allocations[k]->data;
        if (!ours) {
          throw ResultsFailed(fmt::format(
              "output '{}' (result #{}) was not allocated with fib::allocate during this call",
              def.outputs[o].name, o + 1));
        }
      }
    }
    gpu::launch_check(g.plan(sets.at(static_cast<std::size_t>(current_set)), guard_list()),
                      call_number, false, s);
    if (order && current_set == order->check_set && !staged_done) {
      staged_meta.clear();
      for (std::size_t o = 0; o < def.outputs.size(); ++o) {
        const Produced out = produced(o);
        if (staged[o].nbytes() < out.bytes) staged[o] = device_bytes(out.bytes);
        if (out.bytes > 0) {
          FIB_CUDA_CHECK(
              cudaMemcpyAsync(staged[o].raw(), out.data, out.bytes, cudaMemcpyDeviceToDevice, s));
        }
        staged_meta.push_back(
            {def.outputs[o].name, out.dtype, out.shape, staged[o].raw(), out.bytes});
      }
      staged_done = true;
      staged_call = call_number;
      staged_poison = Json::object();
      for (const auto& [k, v] : poison) staged_poison[k] = v;
    }
    ++call_number;
  };

  // Runs part of the evaluation; what a solution can make go wrong becomes the failure (a
  // failure the part finds itself goes to `found`).
  std::optional<Failure> found;
  auto guarded = [&](const std::function<void()>& part) -> std::optional<Failure> {
    try {
      part();
    } catch (const SolutionFailed& e) {
      return Failure{"error", e.what(), call_number};
    } catch (const ResultsFailed& e) {
      return Failure{"results", e.what(), call_number};
    } catch (const cu::TimingError& e) {
      return Failure{"timing", e.what(), call_number};
    } catch (const cu::CudaError& e) {
      return cuda_failure(e, call_number, st);
    }
    return std::nullopt;
  };

  // A check failure, as the CPU path words it.
  auto check_failure = [&](const gpu::CheckFailure& f) -> std::optional<Failure> {
    if (f.kind == gpu::kCheckOk) return std::nullopt;
    Failure out;
    out.call = f.call;
    if (f.kind == gpu::kCheckGuard) {
      const auto k = static_cast<std::size_t>(f.index);
      const DeviceOutput& o = dps ? outputs.at(k) : *allocations.at(k);
      const std::string name = dps ? fmt::format("output '{}'", def.outputs.at(k).name)
                                   : fmt::format("allocation #{}", k + 1);
      out.kind = "guard";
      out.message = f.offset < 0
                        ? fmt::format(
                              "the solution wrote before the start of {} ({} bytes before "
                              "it)",
                              name, -f.offset)
                        : fmt::format(
                              "the solution wrote past the end of {} (byte {} of a {}-byte "
                              "buffer)",
                              name, o.bytes + static_cast<std::size_t>(f.offset), o.bytes);
      return out;
    }
    // An input changed: find its first changed byte against the host copy (the read-only
    // mapping of the input-set file), then re-upload the sets for the next evaluation. A set
    // made on the device has no host copy: the input is named, its byte not.
    out.kind = "input_modified";
    std::string name = "?";
    std::string where;
    if (!sets.empty() && static_cast<std::size_t>(f.index) < sets.front().names.size()) {
      name = sets.front().names[static_cast<std::size_t>(f.index)];
    }
    for (std::size_t k = 0; k < g.file_sets() && k < host->size(); ++k) {
      const DeviceSet& d = sets[k];
      if (static_cast<std::size_t>(f.index) >= d.names.size()) continue;
      const std::string& n = d.names[static_cast<std::size_t>(f.index)];
      const Tensor& h = host->at(k).tensors.at(n);
      const Tensor now = cu::to_host(d.args.tensors.at(n), g.stream());
      if (std::memcmp(now.raw(), h.raw(), h.nbytes()) == 0) continue;
      const auto* a = static_cast<const unsigned char*>(now.raw());
      const auto* b = static_cast<const unsigned char*>(h.raw());
      std::size_t byte = 0;
      while (byte < h.nbytes() && a[byte] == b[byte]) ++byte;
      name = n;
      where = fmt::format(" (byte {} of {} changed", byte, h.nbytes());
      break;
    }
    out.message = fmt::format("the solution modified its input '{}'{}; inputs are read-only)", name,
                              where.empty() ? " (in a timing set made on the device" : where);
    g.mark_sets_dirty();
    return out;
  };

  Json reply{{"ok", true}, {"signature", lib.signature}, {"load_inputs_ms", upload_ms}};
  std::optional<Failure> failure;
  Json trials = Json::array();
  const auto schedule_t0 = Clock::now();
  // Where the worker's time goes, beside the timed calls: reported as worker_phases_ms.
  double measure_ms = 0, outputs_ms = 0, audit_ms = 0;
  double call_ms = 0;  // the last trial's median: sizes the window audit
  for (const TrialPlan& plan : schedule.trials) {
    const CallOrder trial_order = order_of(plan, &plan == &schedule.trials.front());
    order = &trial_order;
    const auto trial_t0 = Clock::now();
    staged.clear();
    for (std::size_t o = 0; o < def.outputs.size(); ++o) {
      std::uint64_t numel = 1;
      for (auto d : expected_shapes[o]) numel *= static_cast<std::uint64_t>(d);
      const auto bytes = dtype_storage_bytes(def.outputs[o].dtype, numel).value_or(0);
      staged.push_back(device_bytes(std::max<std::size_t>(static_cast<std::size_t>(bytes), 1)));
    }
    staged_done = false;
    cu::TimingOptions opts = timing_options(schedule, plan, trial_order, req);
    opts.before_call = before;
    opts.after_call = after;
    g.timer().options() = opts;
    cu::TimingResult result;
    failure = guarded([&] {
      result = g.timer().measure(call);
      // The check call must have run: a trial stopped early by its time cap makes one more call
      // on it, exactly like the others but untimed.
      if (!staged_done) {
        std::size_t i = trial_order.warmup.size() + static_cast<std::size_t>(plan.check_position);
        before(stream, i);
        call(stream);
        after(stream, i);
      }
      found = check_failure(g.take_failure());
    });
    if (!failure) failure = found;
    if (failure) break;
    measure_ms += ms_since(trial_t0);
    const auto outputs_t0 = Clock::now();
    Json checked = nullptr;
    if (!plan.check_output.empty()) {
      // Copied and written while the next trial runs; complete before the reply.
      g.writer().submit(plan.check_output, staged_meta, {}, stream);
      checked = Json{{"call", staged_call}, {"file", plan.check_output}, {"poison", staged_poison}};
    }
    outputs_ms += ms_since(outputs_t0);
    if (!result.samples_ms.empty()) call_ms = summarize(result.samples_ms).median;
    trials.push_back(trial_json(result, std::move(checked)));
  }
  order = nullptr;

  // The window audit: each call's kernels inside its window on the stream.
  const auto audit_t0 = Clock::now();
  if (!failure) {
    failure = guarded([&] {
      g.timer().options().before_call = [&](cudaStream_t s, std::size_t i) {
        current_set = schedule.trials.front().timed[i % schedule.trials.front().timed.size()];
        before(s, i);
      };
      // Three calls, fewer where they would take more than 50 ms (one 300 ms GEMM call shows
      // escaping work as well as three).
      const std::size_t audit_calls =
          call_ms > 0 ? std::clamp<std::size_t>(static_cast<std::size_t>(50.0 / call_ms), 1, 3) : 3;
      const cu::WindowAudit audit = g.timer().audit_window(call, audit_calls);
      Json a{{"available", audit.available}, {"iterations", audit.iterations}};
      if (!audit.note.empty()) a["note"] = audit.note;
      if (audit.escape) a["escape"] = *audit.escape;
      Json ks = Json::array();
      for (const auto& k : audit.kernels) {
        ks.push_back({{"name", k.name},
                      {"stream_id", k.stream_id},
                      {"start_ms", k.start_ms},
                      {"duration_ms", k.duration_ms}});
      }
      a["kernels"] = ks;
      reply["window_audit"] = a;
      if (audit.escape) {
        found = Failure{
            "side_stream",
            fmt::format("the window audit ({} untimed call{} after the trials, under CUPTI): {}",
                        audit_calls, audit_calls == 1 ? "" : "s", *audit.escape),
            call_number};
      } else {
        found = check_failure(g.take_failure());
      }
    });
    if (!failure) failure = found;
  }

  audit_ms = ms_since(audit_t0);

  // Sampling: many draws on one set for the distribution check.
  if (!failure && req.contains("sampling")) {
    const Json& sp = req["sampling"];
    current_set = sp.at("set").get<int>();
    const int draws = sp.at("draws").get<int>();
    std::vector<std::vector<Tensor>> per_output(def.outputs.size());
    failure = guarded([&] {
      for (int d = 0; d < draws; ++d) {
        before(stream, 0);
        call(stream);
        after(stream, 0);
        for (std::size_t o = 0; o < def.outputs.size(); ++o) {
          const Produced out = produced(o);
          Tensor t(out.dtype, out.shape);
          if (t.nbytes() > 0) {
            FIB_CUDA_CHECK(
                cudaMemcpyAsync(t.raw(), out.data, t.nbytes(), cudaMemcpyDeviceToHost, stream));
          }
          per_output[o].push_back(std::move(t));
        }
        FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
      }
      found = check_failure(g.take_failure());
    });
    if (!failure) failure = found;
    if (!failure && draws > 0) {
      write_stacked_draws(sp.at("output").get<std::string>(), def, per_output, draws);
      reply["sampling"] = Json{{"file", sp.at("output")}, {"draws", draws}};
    }
  }
  // Every checked output is in its file before the reply names it. After a failure the files
  // are not read (and after a sticky error the copies cannot complete): errors then are moot.
  try {
    g.writer().finish();
  } catch (const std::exception&) {
    if (!failure) throw;
  }
  reply["trials"] = trials;
  reply["schedule_ms"] = ms_since(schedule_t0);
  reply["cache_flush_ms"] = 0.0;  // the L2 flush runs on the GPU, between the timed windows
  reply["worker_phases_ms"] =
      Json{{"trials", measure_ms}, {"checked_outputs", outputs_ms}, {"window_audit", audit_ms}};
  const cu::DeviceInfo& info = g.timer().device();
  reply["gpu"] = Json{{"device", g.device()},
                      {"name", info.name},
                      {"arch", info.arch()},
                      {"pci_bus_id", info.pci_bus_id},
                      {"driver_version", info.driver_version},
                      {"runtime_version", info.runtime_version}};
  if (failure) {
    reply["failure"] = failure_json(*failure);
    if (st.exit_after_reply) reply["fatal"] = true;
  }
  return reply;
}

// ---- The CUDA reference ----------------------------------------------------------------------
Json gpu_reference(WorkerState& st, const Json& req) {
  const Definition def = parse_definition(req.at("definition"));
  const AxisValues var = parse_axes(req.at("var_axes"));
  std::string why;
  const reference_cuda::Kernel* k = reference_cuda::find_kernel(def, &why);
  if (k == nullptr) return Json{{"ok", false}, {"error", why}};
  GpuWorker& g = gpu_state(st, req);
  const std::string sets_path = req.at("sets").get<std::string>();
  const InputSets host = load_sets(st, req.at("sets"));
  const Schedule schedule = parse_schedule(req.at("schedule"));
  double upload_ms = 0;
  const std::vector<DeviceSet>& sets = g.sets(sets_path, host, schedule.device_pool, &upload_ms);
  const std::vector<std::uint64_t> seeds = req.at("seeds").get<std::vector<std::uint64_t>>();
  if (seeds.size() < sets.size()) {
    throw Error("request.seeds",
                fmt::format("{} seeds for {} input sets", seeds.size(), sets.size()));
  }
  const Json eval_extra = req.value("eval_extra", Json::object());

  int current_set = 0;
  const CallOrder* order = nullptr;
  reference_cuda::DeviceOutputs last, staged;
  bool staged_done = false;
  auto call = [&](cudaStream_t s) {
    last = reference_cuda::run(def, var, sets.at(static_cast<std::size_t>(current_set)).args, s,
                               seeds.at(static_cast<std::size_t>(current_set)));
  };
  Json reply{{"ok", true}, {"kernel", std::string(k->id())}, {"load_inputs_ms", upload_ms}};
  Json trials = Json::array();
  for (const TrialPlan& plan : schedule.trials) {
    const CallOrder trial_order = order_of(plan, &plan == &schedule.trials.front());
    order = &trial_order;
    staged_done = false;
    cu::TimingOptions opts = timing_options(schedule, plan, trial_order, req);
    opts.before_call = [&](cudaStream_t, std::size_t i) { current_set = order->set_for(i); };
    // The outputs of the checked call are kept (each call allocates its own).
    opts.after_call = [&](cudaStream_t, std::size_t) {
      if (current_set == order->check_set && !staged_done) {
        staged = last;
        staged_done = true;
      }
    };
    g.timer().options() = opts;
    cu::TimingResult result;
    try {
      result = g.timer().measure(call);
      if (!staged_done) {
        current_set = trial_order.check_set;
        call(g.stream());
        staged = last;
        staged_done = true;
      }
      FIB_CUDA_CHECK(cudaStreamSynchronize(g.stream()));
    } catch (const std::exception& e) {
      if (dynamic_cast<const cu::StickyError*>(&e) != nullptr) st.exit_after_reply = true;
      try {
        g.writer().finish();  // the earlier trials' files are not read: their errors are moot
      } catch (const std::exception&) {
      }
      reply["ok"] = false;
      reply["error"] = e.what();
      return reply;
    }
    Json checked = nullptr;
    if (!plan.check_output.empty()) {
      // Copied and written while the next trial runs; complete before the reply.
      std::vector<DeviceOutputRef> outs;
      for (const auto& spec : def.outputs) {
        const cu::DeviceTensor& t = staged.at(spec.name);
        outs.push_back({spec.name, t.dtype(), t.shape(), t.raw(), t.nbytes()});
      }
      std::vector<std::pair<std::string, Tensor>> extra;
      append_sampling_expectation(def, host->at(static_cast<std::size_t>(trial_order.check_set)),
                                  eval_extra, &extra);
      // The writer holds device pointers until its copy is queued (now); `staged` keeps the
      // buffers alive until the next trial replaces it, and later work on them is queued after
      // the copy on the same stream.
      g.writer().submit(plan.check_output, outs, std::move(extra), g.stream());
      checked = Json{{"file", plan.check_output}};
    }
    trials.push_back(trial_json(result, std::move(checked)));
  }
  g.writer().finish();
  reply["trials"] = trials;
  return reply;
}

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
