// The CUDA worker's device state (bench/worker/gpu_device.h).
#ifdef FIB_HAVE_CUDA

#include "gpu_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "fib/bench/inputs/device_pool.h"
#include "fib/bench/inputs/input_set_file.h"
#include "fib/cuda/input_fills.h"

namespace fib::bench::detail {

namespace cu = fib::cuda;
using Clock = std::chrono::steady_clock;

cu::DeviceTensor device_bytes(std::size_t n) {
  return cu::DeviceTensor(DType::kUInt8, {static_cast<std::int64_t>(n)});
}

GpuWorker::GpuWorker(int device) : device_(device) {
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

const std::vector<DeviceSet>& GpuWorker::sets(const std::string& path, const InputSets& host,
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
  // A fill the file carries for the same input of several sets (weights the checked sets
  // share) is made once; never one buffer for two inputs of a set.
  std::map<std::string, cu::DeviceTensor> made;
  for (const InputSet& in : *host) {
    DeviceSet d;
    d.args.scalars = in.scalars;
    // By name, fills and tensors alike: the order that numbers inputs for the pool's
    // permutations, as pool_tensors_on_host numbers them.
    std::vector<std::string> names;
    for (const auto& [name, t] : in.tensors) names.push_back(name);
    for (const auto& [name, fill] : in.fills) names.push_back(name);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      d.names.push_back(name);
      if (const auto t = in.tensors.find(name); t != in.tensors.end()) {
        d.args.tensors.emplace(name, cu::to_device(t->second, stream()));
        continue;
      }
      const BulkFill& fill = in.fills.at(name);
      auto [at, fresh] = made.try_emplace(name + "=" + bulk_fill_json(fill).dump());
      if (fresh) at->second = cu::make_bulk_fill(fill, stream());
      d.args.tensors.emplace(name, at->second);
    }
    sets_.push_back(finish_set(std::move(d)));
  }
  // The pool's sets hold the shared weights' buffers too (pool_tensors_on_host does the same):
  // the device holds them once, and each pool set's own bytes are its activations.
  const std::set<std::string, std::less<>> shared = shared_fills(*host);
  for (int j = 0; j < pool.count; ++j) {
    const DeviceSet& from = sets_.at(static_cast<std::size_t>(j) % host->size());
    DeviceSet d;
    d.args.scalars = from.args.scalars;
    std::vector<bool> from_source(from.names.size(), false);
    for (std::size_t k = 0; k < from.names.size(); ++k) {
      const cu::DeviceTensor& src = from.args.tensors.at(from.names[k]);
      if (shared.contains(from.names[k])) {
        d.names.push_back(from.names[k]);
        d.args.tensors.emplace(from.names[k], src);
        from_source[k] = true;
        continue;
      }
      cu::DeviceTensor dst(src.dtype(), src.shape());
      const PoolPermutation how = pool_permutation(src.dtype(), src.shape(), pool.seed,
                                                   pool.first + j, static_cast<int>(k));
      if (how.permuted) {
        gpu::launch_permute(src.raw(), dst.raw(), how.rows, how.middle, how.cols, how.unit,
                            stream());
      } else if (src.nbytes() > 0) {
        FIB_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice,
                                       stream()));
      }
      d.names.push_back(from.names[k]);
      d.args.tensors.emplace(from.names[k], std::move(dst));
    }
    sets_.push_back(finish_set(std::move(d), &from, from_source));
  }
  FIB_CUDA_CHECK(cudaStreamSynchronize(stream()));
  sets_path_ = path;
  sets_pool_ = pool;
  sets_dirty_ = false;
  *upload_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return sets_;
}

gpu::CheckPlan GpuWorker::plan(const DeviceSet& d, const std::vector<gpu::GuardRegion>& guards) {
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

gpu::CheckFailure GpuWorker::take_failure() {
  gpu::CheckFailure f{};
  FIB_CUDA_CHECK(cudaMemcpyAsync(&f, failure_.raw(), sizeof f, cudaMemcpyDeviceToHost, stream()));
  FIB_CUDA_CHECK(cudaStreamSynchronize(stream()));
  clear_failure();
  return f;
}

DeviceSet GpuWorker::finish_set(DeviceSet d, const DeviceSet* source,
                                const std::vector<bool>& from_source) {
  std::vector<gpu::CheckedInput> table;
  // Chunk prefix sums of every input (each call's check), and of those hashed here (an input
  // taken from the source counts no chunks: the check kernel skips an input of none).
  std::vector<unsigned long long> starts{0}, hashed_starts{0};
  for (std::size_t k = 0; k < d.names.size(); ++k) {
    const cu::DeviceTensor& dt = d.args.tensors.at(d.names[k]);
    table.push_back({dt.raw(), static_cast<unsigned long long>(dt.nbytes()), 0});
    const unsigned long long chunks =
        (dt.nbytes() + gpu::kHashChunkBytes - 1) / gpu::kHashChunkBytes;
    starts.push_back(starts.back() + chunks);
    const bool taken = source != nullptr && k < from_source.size() && from_source[k];
    hashed_starts.push_back(hashed_starts.back() + (taken ? 0 : chunks));
  }
  d.total_chunks = starts.back();
  d.table = upload(table.data(), table.size() * sizeof(gpu::CheckedInput));
  d.chunk_starts = upload(starts.data(), starts.size() * sizeof(unsigned long long));
  d.partial = device_bytes(std::max<std::size_t>(1, table.size()) * sizeof(unsigned long long));
  FIB_CUDA_CHECK(cudaMemsetAsync(d.partial.raw(), 0, d.partial.nbytes(), stream()));
  if (hashed_starts.back() == starts.back()) {
    gpu::launch_check(plan(d, {}), 0, /*store_expected=*/true, stream());
    return d;
  }
  // A shared weight is hashed once, with the checked sets: the pool's sets (hundreds of them, of
  // a weight of gigabytes) take its hash from their source's table, after hashing the rest.
  const cu::DeviceTensor hashed =
      upload(hashed_starts.data(), hashed_starts.size() * sizeof(unsigned long long));
  gpu::CheckPlan p = plan(d, {});
  p.chunk_starts = static_cast<unsigned long long*>(hashed.raw());
  p.total_chunks = hashed_starts.back();
  gpu::launch_check(p, 0, /*store_expected=*/true, stream());
  auto* to = static_cast<gpu::CheckedInput*>(d.table.raw());
  const auto* from = static_cast<const gpu::CheckedInput*>(source->table.raw());
  for (std::size_t k = 0; k < from_source.size() && k < table.size(); ++k) {
    if (!from_source[k]) continue;
    FIB_CUDA_CHECK(cudaMemcpyAsync(to + k, from + k, sizeof(gpu::CheckedInput),
                                   cudaMemcpyDeviceToDevice, stream()));
  }
  FIB_CUDA_CHECK(cudaStreamSynchronize(stream()));  // `hashed` is freed on return
  return d;
}

cu::DeviceTensor GpuWorker::upload(const void* data, std::size_t bytes) {
  cu::DeviceTensor t = device_bytes(std::max<std::size_t>(bytes, 1));
  FIB_CUDA_CHECK(cudaMemcpyAsync(t.raw(), data, bytes, cudaMemcpyHostToDevice, stream()));
  FIB_CUDA_CHECK(cudaStreamSynchronize(stream()));
  return t;
}

void GpuWorker::clear_failure() {
  FIB_CUDA_CHECK(cudaMemsetAsync(failure_.raw(), 0, failure_.nbytes(), stream()));
}

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

}  // namespace

GpuWorker& gpu_state(WorkerState& st, const std::string& name) {
  const int device = parse_device(name);
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

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
