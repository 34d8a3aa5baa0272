// Output memory between unmapped address space (bench/worker/gpu_memory.h).
#ifdef FIB_HAVE_CUDA

#include "gpu_memory.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <mutex>

namespace fib::bench::detail {

namespace {

// The driver's entry points, found through the runtime (fib links the runtime statically and
// not libcuda itself).
struct Driver {
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*granularity)(std::size_t*, const CUmemAllocationProp*,
                          CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*reserve)(CUdeviceptr*, std::size_t, std::size_t, CUdeviceptr,
                      unsigned long long) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, std::size_t, const CUmemAllocationProp*,
                     unsigned long long) = nullptr;
  CUresult (*map)(CUdeviceptr, std::size_t, std::size_t, CUmemGenericAllocationHandle,
                  unsigned long long) = nullptr;
  CUresult (*set_access)(CUdeviceptr, std::size_t, const CUmemAccessDesc*, std::size_t) = nullptr;
  CUresult (*unmap)(CUdeviceptr, std::size_t) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  bool ok = false;
};

template <class Fn>
bool entry(const char* name, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found);
#else  // toolkits before 12.5 have only the unversioned lookup
  const cudaError_t e = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &found);
#endif
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    return false;
  }
  *fn = reinterpret_cast<Fn>(p);
  return true;
}

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.ok = entry("cuDeviceGetAttribute", &d.device_get_attribute) &&
           entry("cuMemGetAllocationGranularity", &d.granularity) &&
           entry("cuMemAddressReserve", &d.reserve) && entry("cuMemCreate", &d.create) &&
           entry("cuMemMap", &d.map) && entry("cuMemSetAccess", &d.set_access) &&
           entry("cuMemUnmap", &d.unmap) && entry("cuMemRelease", &d.release);
  });
  return d;
}

CUmemAllocationProp props(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  return p;
}

bool vmm_supported(int device) {
  const Driver& d = driver();
  if (!d.ok) return false;
  int supported = 0;
  return d.device_get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                static_cast<CUdevice>(device)) == CUDA_SUCCESS &&
         supported != 0;
}

}  // namespace

std::unique_ptr<GuardedDeviceRange> GuardedDeviceRange::make(int device, std::size_t bytes) {
  if (!vmm_supported(device)) return nullptr;
  const Driver& d = driver();
  const CUmemAllocationProp prop = props(device);
  std::size_t granule = 0;
  if (d.granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
      granule == 0) {
    return nullptr;
  }
  const std::size_t body = (bytes + granule - 1) / granule * granule;
  // One unmapped granule on each side of the body. The reservation is never freed: its
  // addresses are not handed out again while this worker lives.
  CUdeviceptr va = 0;
  if (d.reserve(&va, body + 2 * granule, granule, 0, 0) != CUDA_SUCCESS) return nullptr;
  CUmemGenericAllocationHandle handle = 0;
  if (d.create(&handle, body, &prop, 0) != CUDA_SUCCESS) return nullptr;
  const CUdeviceptr start = va + granule;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (d.map(start, body, 0, handle, 0) != CUDA_SUCCESS) {
    d.release(handle);
    return nullptr;
  }
  if (d.set_access(start, body, &access, 1) != CUDA_SUCCESS) {
    d.unmap(start, body);
    d.release(handle);
    return nullptr;
  }
  std::unique_ptr<GuardedDeviceRange> r(new GuardedDeviceRange());
  r->mapped_ = reinterpret_cast<void*>(start);
  r->mapped_bytes_ = body;
  r->handle_ = handle;
  return r;
}

GuardedDeviceRange::~GuardedDeviceRange() {
  const Driver& d = driver();
  // Work queued on the output (poisoning, checks, copies) ends before its memory goes.
  (void)cudaDeviceSynchronize();
  d.unmap(reinterpret_cast<CUdeviceptr>(mapped_), mapped_bytes_);
  d.release(static_cast<CUmemGenericAllocationHandle>(handle_));
}

std::string output_guard_kind(int device) {
  return vmm_supported(device) ? "unmapped pages" : "guard bytes";
}

}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
