#include "devices.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "environment.h"
#include "fib/base/diagnostics.h"
#include "fib/bench/builder/build.h"
#include "fib/bench/launch/process_tree.h"
#ifdef FIB_HAVE_CUDA
#include "fib/cuda/runtime.h"
#endif

namespace fib::bench::detail {

namespace {

std::vector<std::string> split_device_list(const std::string& text) {
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
  return parts;
}

Error not_a_device(const std::string& p) {
  return Error("--device", fmt::format("'{}' is not a device", p),
               "use cpu, cuda:N, a list such as cuda:0,cuda:1, or cuda:all");
}

// The first ordinal `p` names ("cuda" and "cuda:all" start at 0).
int first_ordinal(const std::string& p) {
  if (p == "cuda:all") return 0;  // every visible one (checked later)
  const std::optional<Device> d = parse_device(p);
  if (!d) throw not_a_device(p);
  if (d->is_cpu()) throw Error("--device", "cpu and CUDA devices cannot be mixed in one run");
  return d->ordinal;
}

}  // namespace

DeviceChoice parse_devices(const std::string& text) {
  DeviceChoice c;
  if (parse_device(text) == Device::cpu()) return c;
  c.gpu = true;
  int visible = -1;
  std::string why = "this fib was built without the CUDA path (configure with -DFIB_CUDA=ON)";
#ifdef FIB_HAVE_CUDA
  why.clear();
  visible = cuda::device_count(&why);
#endif
  for (const std::string& p : split_device_list(text)) {
    const int n = first_ordinal(p);
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
  if (c.cuda.empty()) throw not_a_device(text);
  return c;
}

Worker& Lane::solution_worker(const WorkerSpec& spec) {
  if (!solution || !solution->alive() || !solution->channel_idle()) {
    solution.reset();  // the old one (and its sandbox) is gone before a new one starts
    solution = std::make_unique<Worker>(spec);
  }
  return *solution;
}

namespace {

// What the parked workers of a lane may hold resident: a quarter of the host's memory (a
// Python worker holds its interpreter and torch, a few hundred MB).
std::uint64_t parked_memory_budget() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * page / 4 : ~std::uint64_t{0};
}

}  // namespace

std::uint64_t Lane::parked_bytes() const {
  std::uint64_t total = 0;
  for (const ParkedWorker& p : parked) total += resident_bytes(p.worker->pid());
  return total;
}

void Lane::switch_solution(const std::string& key, std::size_t keep) {
  if (key == solution_key) return;
  if (solution && solution->alive()) {
    stop_process_tree(solution->pid());
    parked.push_back(ParkedWorker{solution_key, std::move(solution)});
  }
  solution.reset();
  solution_key = key;
  const auto mine = std::find_if(parked.begin(), parked.end(),
                                 [&](const ParkedWorker& p) { return p.key == key; });
  if (mine != parked.end()) {
    solution = std::move(mine->worker);
    parked.erase(mine);
    continue_process_tree(solution->pid());
  }
  // Over the limits, the worker parked last goes (~Worker kills its whole tree): the lane runs
  // its solutions round after round in one order, so the one it just left is needed last, and
  // the others stay persistent (ending the oldest instead would end each one just before its
  // turn).
  while (parked.size() > keep || (!parked.empty() && parked_bytes() > parked_memory_budget())) {
    parked.pop_back();
  }
}

void Lane::keep_parked_only(const std::vector<std::string>& names) {
  std::erase_if(parked, [&](const ParkedWorker& p) {
    const std::string name = p.key.substr(0, p.key.rfind('@'));
    return std::find(names.begin(), names.end(), name) == names.end();
  });
}

std::vector<std::unique_ptr<Lane>> make_lanes(const DeviceChoice& devices) {
  std::vector<std::unique_ptr<Lane>> lanes;
  if (!devices.gpu) {
    auto lane = std::make_unique<Lane>();
    lane->device = Device::cpu();
    lane->hardware = cpu_model();
    lanes.push_back(std::move(lane));
  }
#ifdef FIB_HAVE_CUDA
  for (int d : devices.cuda) {
    const cuda::DeviceInfo info = cuda::device_info(d);
    auto lane = std::make_unique<Lane>();
    lane->device = Device::cuda(d);
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
    lanes.push_back(std::move(lane));
  }
#endif
  return lanes;
}

std::string lane_label(const Lane& lane) {
  const std::string device = lane.device.to_string();
  return lane.device.is_cpu() ? device : fmt::format("{} ({})", device, lane.hardware);
}

WorkerSpec worker_spec(const RunOptions& o, bool gpu, const std::filesystem::path& home,
                       const std::string& role) {
  WorkerSpec s;
  s.executable = o.worker_executable;
  s.role = role;
  // CUDA reserves far more address space than it uses (a context alone reserves tens of GiB),
  // so an address-space limit breaks GPU workers; they run without one.
  s.memory_limit_bytes = gpu                        ? 0
                         : o.memory_limit_bytes > 0 ? o.memory_limit_bytes
                                                    : physical_memory() / 2;
  // RLIMIT_DATA counts the heap and private writable mappings, not the address space CUDA
  // reserves: a GPU worker's memory limit, where one is asked for (scripts/device/gpu-check.sh
  // checks that CUDA starts under it on the GPU machine).
  if (gpu && o.memory_limit_bytes > 0) s.data_limit_bytes = o.memory_limit_bytes;
  if (role == "solution") {
    // Enough for a torch worker's thread pools on a large host; a fork bomb stops here.
    // RLIMIT_NPROC holds where the worker's uid is not root outside the sandbox.
    s.max_processes = 4096;
    s.max_open_files = 16384;
  }
  s.home = home;
  s.threads = o.threads;
  return s;
}

}  // namespace fib::bench::detail

namespace fib::bench {

std::string device_hardware(const std::string& device) {
  const detail::DeviceChoice choice = detail::parse_devices(device);
  if (!choice.gpu) return detail::cpu_model();
#ifdef FIB_HAVE_CUDA
  if (choice.cuda.size() == 1) return cuda::device_info(choice.cuda[0]).name;
#endif
  throw Error(device, "names no single device", "give cpu or cuda:N");
}

}  // namespace fib::bench
