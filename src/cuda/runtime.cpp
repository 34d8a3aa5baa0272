// fib::cuda runtime helpers over the CUDA runtime API (see include/fib/cuda/runtime.h).
#include "fib/cuda/runtime.h"

#include <cuda_runtime.h>

#include <fmt/format.h>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <filesystem>

namespace fib::cuda {

CudaError::CudaError(int code, std::string message)
    : fib::Error("", std::move(message)), code_(code) {}

bool is_sticky(int code) {
  // The runtime's documentation lists these as leaving the context in an unusable state: every
  // later call in the process fails with the same error, so the process must be replaced.
  switch (static_cast<cudaError_t>(code)) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

void check(int code, const char* call, const char* file, int line) {
  if (code == cudaSuccess) return;
  auto err = static_cast<cudaError_t>(code);
  std::string where = std::filesystem::path(file).filename().string();
  std::string message = fmt::format("CUDA error {} ({}): {} [{} at {}:{}]", cudaGetErrorName(err),
                                    code, cudaGetErrorString(err), call, where, line);
  if (is_sticky(code)) throw StickyError(code, std::move(message));
  throw CudaError(code, std::move(message));
}

void check_last_launch(const char* file, int line) {
  check(static_cast<int>(cudaGetLastError()), "kernel launch", file, line);
}

double DeviceInfo::peak_dram_bytes_per_second() const {
  return 2.0 * memory_clock_khz * 1e3 * (memory_bus_bits / 8.0);
}

std::string DeviceInfo::arch() const { return fmt::format("sm_{}{}", major, minor); }

int device_count(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it so later calls start clean
    if (why) *why = fmt::format("{}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device is visible";
  return n;
}

bool available(std::string* why) { return device_count(why) > 0; }

DeviceInfo device_info(int ordinal) {
  cudaDeviceProp p{};
  FIB_CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = p.name;
  info.major = p.major;
  info.minor = p.minor;
  info.sm_count = p.multiProcessorCount;
  info.l2_bytes = p.l2CacheSize;
  info.persisting_l2_max_bytes = p.persistingL2CacheMaxSize;
  info.global_memory_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
  info.shared_memory_per_block_optin = static_cast<std::int64_t>(p.sharedMemPerBlockOptin);
  info.memory_bus_bits = p.memoryBusWidth;
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain.
  FIB_CUDA_CHECK(cudaDeviceGetAttribute(&info.sm_clock_khz, cudaDevAttrClockRate, ordinal));
  FIB_CUDA_CHECK(
      cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, ordinal));
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess) info.pci_bus_id = bus;
  FIB_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  FIB_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  return info;
}

void set_device(int ordinal) { FIB_CUDA_CHECK(cudaSetDevice(ordinal)); }

Stream::Stream() { FIB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (stream_) (void)cudaStreamDestroy(stream_);
}
void Stream::synchronize() const { FIB_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

namespace {
// The allocation cache (enable_allocation_cache): freed buffers by (device, size), kept for the
// next allocation of that size on that device. Never shrinks while enabled.
struct AllocationCache {
  std::mutex mutex;
  bool enabled = false;
  std::map<std::pair<int, std::size_t>, std::vector<void*>> free;
};
AllocationCache& allocation_cache() {
  static AllocationCache* cache = new AllocationCache();  // outlives static destructors
  return *cache;
}
int current_device() {
  int d = 0;
  (void)cudaGetDevice(&d);
  return d;
}
}  // namespace

void enable_allocation_cache() {
  AllocationCache& c = allocation_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.enabled = true;
}

void release_allocation_cache() {
  AllocationCache& c = allocation_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [key, list] : c.free) {
    for (void* p : list) (void)cudaFree(p);
  }
  c.free.clear();
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  const std::size_t size = bytes == 0 ? 1 : bytes;
  {
    AllocationCache& c = allocation_cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.enabled) {
      auto it = c.free.find({current_device(), size});
      if (it != c.free.end() && !it->second.empty()) {
        data_ = it->second.back();
        it->second.pop_back();
        return;
      }
    }
  }
  cudaError_t e = cudaMalloc(&data_, size);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    release_allocation_cache();  // what the cache holds may be enough; try once more
    e = cudaMalloc(&data_, size);
  }
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw CudaError(static_cast<int>(e),
                    fmt::format("out of device memory: cudaMalloc of {} bytes failed", bytes));
  }
  FIB_CUDA_CHECK(e);
}
DeviceBuffer::~DeviceBuffer() {
  if (!data_) return;
  AllocationCache& c = allocation_cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.enabled) {
      c.free[{current_device(), bytes_ == 0 ? 1 : bytes_}].push_back(data_);
      return;
    }
  }
  (void)cudaFree(data_);
}

DeviceTensor::DeviceTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(shape_numel(shape_)) {
  auto bytes = dtype_storage_bytes(dtype_, static_cast<std::uint64_t>(numel_));
  if (!bytes) throw fib::Error("", "device tensor of " + shape_to_string(shape_) + " is too large");
  nbytes_ = static_cast<std::size_t>(*bytes);
  buffer_ = std::make_shared<DeviceBuffer>(nbytes_);
}

DeviceTensor to_device(const Tensor& host, cudaStream_t stream) {
  DeviceTensor d(host.dtype(), host.shape());
  if (host.nbytes() > 0) {
    FIB_CUDA_CHECK(
        cudaMemcpyAsync(d.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, stream));
    FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return d;
}

Tensor to_host(const DeviceTensor& device, cudaStream_t stream) {
  Tensor h(device.dtype(), device.shape());
  if (h.nbytes() > 0) {
    FIB_CUDA_CHECK(
        cudaMemcpyAsync(h.raw(), device.raw(), h.nbytes(), cudaMemcpyDeviceToHost, stream));
    FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return h;
}

void fill_bytes(const DeviceTensor& t, unsigned char byte, cudaStream_t stream) {
  if (t.nbytes() > 0) FIB_CUDA_CHECK(cudaMemsetAsync(t.raw(), byte, t.nbytes(), stream));
}

}  // namespace fib::cuda
