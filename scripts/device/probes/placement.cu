// Does where its memory lands change a memory-bound kernel's time? A read kernel over device
// buffers, each sample after a 200 MiB flush (written, then read); medians of the samples.
// docs/benchmarks.md, "Ninth session".
//   nvcc -O3 -arch=native -o /tmp/placement scripts/device/probes/placement.cu
//   /tmp/placement buffer [MiB] [seed]  one buffer, reallocated 16 times with padding
//                                       allocations of random size in between, each placement
//                                       timed twice (60 samples a median)
//   /tmp/placement pool                 16 buffers of 32 MiB cycled per sample, as fib run's
//                                       device pool: first the flush buffer reallocated 12
//                                       times (pool fixed), then the pool (flush fixed)
//   /tmp/placement runs                 12 simulated runs, each allocating afresh: the median of
//                                       90 samples over one pool of 48 buffers, against 30
//                                       samples on each of three pools of 16 allocated apart
//                                       (padding between them): does a run's median vary less
//                                       across runs when it spans three pools?
//   /tmp/placement vmm                  the pool reallocated 12 times three ways: cudaMalloc
//                                       (the control), one physical allocation per buffer
//                                       mapped through the driver's virtual memory API, and one
//                                       physical allocation for the whole pool mapped at a
//                                       1 GiB-aligned address: does an explicit mapping make
//                                       the medians of fresh placements agree?
//                                       (link with -lcuda)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

__global__ void readsum(const float4* __restrict__ p, size_t n, float* out) {
  float acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.f) *out = acc;
}

__global__ void flush(float4* p, size_t n) {
  float acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = make_float4(1, 2, 3, 4);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 v = p[i];
    acc += v.x;
  }
  if (acc == 12345.f) p[0].y = acc;
}

namespace {

const size_t kFlush = size_t{200} << 20;
int sms = 0;
float* out = nullptr;
cudaEvent_t e0, e1;
std::mt19937 rng;
std::vector<void*> pads;  // never freed: they keep the next allocation elsewhere

// `samples` reads (after 3 unrecorded ones), cycling over `pool`, appended to `t` in us.
void sample_us(const std::vector<float4*>& pool, size_t bytes, float4* fl, int samples,
               std::vector<float>& t) {
  for (int it = 0; it < samples + 3; ++it) {
    flush<<<sms * 4, 512>>>(fl, kFlush / 16);
    cudaEventRecord(e0);
    readsum<<<sms * 4, 512>>>(pool[it % pool.size()], bytes / 16, out);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (it >= 3) t.push_back(ms * 1000);
  }
}

float median(std::vector<float> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

float median_us(const std::vector<float4*>& pool, size_t bytes, float4* fl, int samples) {
  std::vector<float> t;
  sample_us(pool, bytes, fl, samples, t);
  return median(t);
}

void pad() {
  void* p = nullptr;
  cudaMalloc(&p, ((rng() % 64) + 1) << 20);
  pads.push_back(p);
}

std::vector<float4*> make_pool(int n, size_t bytes) {
  std::vector<float4*> pool(n);
  for (auto& p : pool) {
    cudaMalloc(&p, bytes);
    cudaMemset(p, 0, bytes);
  }
  return pool;
}

void report(const char* what, std::vector<float> m) {
  std::sort(m.begin(), m.end());
  std::printf("%s: medians %.2f .. %.2f us, spread %.2f%%\n", what, m.front(), m.back(),
              100 * (m.back() - m.front()) / m[m.size() / 2]);
}

}  // namespace

// Simulated runs: each allocates its pools afresh (after freeing the last run's) and reports one
// median over all its samples.
void runs_mode(float4* fl) {
  const size_t bytes = size_t{32} << 20;
  rng.seed(9);
  std::vector<float> one, three;
  std::vector<float4*> live;
  auto free_live = [&] {
    for (auto p : live) cudaFree(p);
    live.clear();
  };
  for (int r = 0; r < 12; ++r) {
    free_live();
    pad();
    std::vector<float4*> pool = make_pool(48, bytes);
    live = pool;
    one.push_back(median_us(pool, bytes, fl, 90));
    free_live();
    std::vector<std::vector<float4*>> pools;
    for (int k = 0; k < 3; ++k) {
      pad();
      pools.push_back(make_pool(16, bytes));
      live.insert(live.end(), pools.back().begin(), pools.back().end());
    }
    // 30 samples on each pool, pooled into one median.
    std::vector<float> t;
    for (const auto& pl : pools) sample_us(pl, bytes, fl, 30, t);
    three.push_back(median(t));
    std::printf("run %2d: one pool %.2f us, three pools %.2f us\n", r, one.back(), three.back());
  }
  free_live();
  report("one pool of 48 per run", one);
  report("three pools of 16 per run", three);
}

// A pool of n buffers through cuMemCreate/cuMemMap: one physical allocation per buffer
// (whole = false) or one for the whole pool at a 1 GiB-aligned address (whole = true).
struct VmmPool {
  std::vector<float4*> buffers;
  std::vector<CUmemGenericAllocationHandle> handles;
  CUdeviceptr base = 0;
  size_t reserved = 0;
};

VmmPool make_vmm_pool(int n, size_t bytes, bool whole) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  const size_t each = (bytes + gran - 1) / gran * gran;
  VmmPool pool;
  pool.reserved = each * n;
  cuMemAddressReserve(&pool.base, pool.reserved, whole ? size_t{1} << 30 : 0, 0, 0);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const int pieces = whole ? 1 : n;
  const size_t piece = whole ? pool.reserved : each;
  for (int k = 0; k < pieces; ++k) {
    CUmemGenericAllocationHandle h;
    cuMemCreate(&h, piece, &prop, 0);
    cuMemMap(pool.base + k * piece, piece, 0, h, 0);
    pool.handles.push_back(h);
  }
  cuMemSetAccess(pool.base, pool.reserved, &access, 1);
  for (int k = 0; k < n; ++k) {
    pool.buffers.push_back(reinterpret_cast<float4*>(pool.base + k * each));
    cudaMemset(pool.buffers.back(), 0, bytes);
  }
  return pool;
}

void free_vmm_pool(VmmPool& pool) {
  cudaDeviceSynchronize();
  cuMemUnmap(pool.base, pool.reserved);
  for (auto h : pool.handles) cuMemRelease(h);
  cuMemAddressFree(pool.base, pool.reserved);
  pool = VmmPool{};
}

void vmm_mode(float4* fl) {
  const size_t bytes = size_t{32} << 20;
  rng.seed(11);
  std::vector<float> plain, per_buffer, whole;
  for (int q = 0; q < 12; ++q) {
    pad();
    std::vector<float4*> pool = make_pool(16, bytes);
    plain.push_back(median_us(pool, bytes, fl, 90));
    for (auto p : pool) cudaFree(p);
    pad();
    VmmPool a = make_vmm_pool(16, bytes, false);
    per_buffer.push_back(median_us(a.buffers, bytes, fl, 90));
    free_vmm_pool(a);
    pad();
    VmmPool b = make_vmm_pool(16, bytes, true);
    whole.push_back(median_us(b.buffers, bytes, fl, 90));
    std::printf(
        "placement %2d: cudaMalloc %.2f us, mapped per buffer %.2f us, mapped whole %.2f us"
        " (va %p)\n",
        q, plain.back(), per_buffer.back(), whole.back(), (void*)b.buffers[0]);
    free_vmm_pool(b);
  }
  report("cudaMalloc pool reallocated", plain);
  report("pool mapped per buffer (cuMemMap)", per_buffer);
  report("pool mapped whole at 1 GiB alignment", whole);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "buffer";
  cudaFree(nullptr);  // the primary context, which vmm mode's driver API calls use
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaMalloc(&out, 4);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  if (std::strcmp(mode, "vmm") == 0 || std::strcmp(mode, "runs") == 0) {
    float4* fl = nullptr;
    cudaMalloc(&fl, kFlush);
    if (mode[0] == 'v') {
      vmm_mode(fl);
    } else {
      runs_mode(fl);
    }
    return 0;
  }
  const bool pool_mode = std::strcmp(mode, "pool") == 0;
  std::vector<float> m;
  if (!pool_mode) {
    const size_t bytes = size_t(argc > 2 ? std::atoll(argv[2]) : 64) << 20;
    rng.seed(argc > 3 ? std::atoi(argv[3]) : 1);
    float4* fl = nullptr;
    cudaMalloc(&fl, kFlush);
    for (int p = 0; p < 16; ++p) {
      pad();
      const std::vector<float4*> buf = make_pool(1, bytes);
      const float a = median_us(buf, bytes, fl, 60), b = median_us(buf, bytes, fl, 60);
      std::printf("placement %2d (va %p): %.2f us, again %.2f us\n", p, (void*)buf[0], a, b);
      m.push_back(a);
      cudaFree(buf[0]);
    }
    char what[64];
    std::snprintf(what, sizeof what, "%zu MiB read, buffer reallocated", bytes >> 20);
    report(what, m);
  } else {
    const size_t bytes = size_t{32} << 20;
    rng.seed(5);
    std::vector<float4*> pool = make_pool(16, bytes);
    for (int f = 0; f < 12; ++f) {
      pad();
      float4* fl = nullptr;
      cudaMalloc(&fl, kFlush);
      const float a = median_us(pool, bytes, fl, 90), b = median_us(pool, bytes, fl, 90);
      std::printf("flush placement %2d: %.2f us, again %.2f us\n", f, a, b);
      m.push_back(a);
      cudaFree(fl);
    }
    report("flush reallocated, pool fixed", m);
    float4* fl = nullptr;
    cudaMalloc(&fl, kFlush);
    m.clear();
    for (int q = 0; q < 12; ++q) {
      for (auto p : pool) cudaFree(p);
      pad();
      pool = make_pool(16, bytes);
      const float a = median_us(pool, bytes, fl, 90), b = median_us(pool, bytes, fl, 90);
      std::printf("pool placement %2d: %.2f us, again %.2f us\n", q, a, b);
      m.push_back(a);
    }
    report("pool reallocated, flush fixed", m);
  }
  return 0;
}
