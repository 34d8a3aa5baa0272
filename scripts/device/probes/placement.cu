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
//   /tmp/placement drift [seconds] [tag]
//                                       four pools of 16 x 32 MiB allocated once, sampled in
//                                       turn (sample i reads pool i % 4) for that long (default
//                                       40 s): per second, each pool's median with the GPU and
//                                       memory temperatures, power and clocks (NVML). Pools that
//                                       differ by a constant point at placement; all four moving
//                                       together point at time. Run it several times to compare
//                                       processes, as fib run's runs are. (link with -ldl)
//   /tmp/placement map [rounds]         the device's memory allocated in 1 GiB chunks (all but
//                                       4 GiB), each chunk read as 32 buffers of 32 MiB, the
//                                       chunks in turn, 16 samples per chunk per round (default
//                                       40 rounds): each chunk's median over even and over odd
//                                       rounds. How much does a memory-bound read depend on
//                                       which part of the memory it lands in?
//   /tmp/placement flush [seed]         after padding allocations of a size drawn from the seed,
//                                       a pool of 64 x 32 MiB and twelve 200 MiB flush buffers
//                                       (padding between them), sampled flush buffer by flush
//                                       buffer over 20 rounds: each flush buffer's median (even
//                                       and odd rounds), the first one's, and all twelve
//                                       together. Does the flush buffer's placement move the
//                                       read, and does rotating over several average it out?
//   /tmp/placement contexts [n]         n times in one process (default 8): the primary context
//                                       created, a pool of 64 x 32 MiB and a flush buffer
//                                       allocated, 3000 samples' median, the context destroyed
//                                       (cudaDeviceReset); then the same with a kernel touching
//                                       the buffer every 64 KiB before each timed read. Does each
//                                       context read at its own speed, and is it the address
//                                       translation?
//   /tmp/placement kinds [n]            n contexts in one process (default 12), in each,
//   interleaved
//                                       over rounds: an empty event pair, a read of 32 MiB and one
//                                       of 256 MiB, and an FMA loop that touches no memory, each
//                                       after the flush: each kind's median per context. Is a
//                                       context's shift additive (launch and events, the same us
//                                       for every kind), proportional to the bytes read (memory
//                                       speed), or in every kernel (clocks)?
//   /tmp/placement clocks [n]           n contexts in one process (default 10): the FMA loop with
//                                       its first block reading the SM's cycle counter and the
//                                       global timer at its start and end, and the event pair
//                                       around it: per context the medians of the events' time,
//                                       of the block's cycles and of its nanoseconds, and the SM
//                                       clock they imply. Does a context that runs the loop
//                                       slower run it in more cycles, or at a lower clock?
//   /tmp/placement smid [n]             n contexts in one process (default 8): the FMA loop with
//                                       every block recording its multiprocessor (%smid) and its
//                                       start and end (global timer): per context the event time,
//                                       the blocks' span, the most blocks one multiprocessor ran,
//                                       and whether the block-to-multiprocessor placement repeats
//                                       from call to call and from context to context.
//   /tmp/placement span [n]             n contexts in one process (default 10): the 32 MiB and
//                                       256 MiB reads and the FMA loop, each block's thread 0
//                                       folding its start and end (global timer) into the
//                                       kernel's first start and last end: per context the
//                                       medians of the event time and of the blocks' span. Is a
//                                       context's shift inside the kernel or around it?
//   /tmp/placement streams [n]          n contexts in one process (default 6), in each 4 streams
//                                       and 3 sets of 8 event pairs: batches of 8 queued samples
//                                       (the 32 MiB read with its blocks' span, and the FMA loop)
//                                       for every (stream, event set) in turn, 40 rounds. Is the
//                                       launch offset a context's, or a stream's or an event's,
//                                       which a timer could average by rotating them?
//   /tmp/placement calib [n]            n contexts in one process (default 12): in each, the
//                                       launch margin (events less the blocks' span of the 32 MiB
//                                       read, queued batches of 8) at the start and at the end,
//                                       and between them five other calls (a full-grid FMA loop,
//                                       a small-grid one, a single block, a read + FMA pair, an
//                                       8 MiB read). Across contexts: does subtracting each
//                                       context's margin take the context's offset out of the
//                                       other calls' event times?
//   /tmp/placement scratch [n] [k]      n primary contexts in one process (default 8), in each:
//                                       its launch margin (as calib), then k scratch contexts
//                                       (default 8, cuCtxCreate through the runtime's driver
//                                       entry points, as a worker could) each measuring its own
//                                       margin, then calib's five calls. Does the primary's
//                                       margin less the scratch contexts' median correct the
//                                       calls' event times across primaries, and at what cost?
//   /tmp/placement steps [seconds]      for that long (default 60), in 10 s cycles of 5 s busy (a
//                                       4.4 ms FMA load between samples) and 5 s light (5 ms host
//                                       sleeps): per half second, the median event time of the
//                                       load and of the 44 us FMA loop, the SM clock the loop's
//                                       first block implies (cycles over global-timer ns), and
//                                       NVML's SM clock, power and temperature. Do kernel times
//                                       step with the SMs' effective clock while NVML reads the
//                                       same clock? (link with -ldl)
//   /tmp/placement hold [seconds]       holds a context open, idle, that long (default 120): is
//                                       the shift between processes the GPU waking up?
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

__device__ unsigned long long now_ns() {
  unsigned long long g;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
  return g;
}

__device__ void readsum_body(const float4* __restrict__ p, size_t n, float* out) {
  float acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.f) *out = acc;
}

__global__ void readsum(const float4* __restrict__ p, size_t n, float* out) {
  readsum_body(p, n, out);
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

// One 16-byte read per 64 KiB of the buffer: loads its address translations (and a few sectors
// into the L2) without reading the buffer.
__global__ void touch(const float4* __restrict__ p, size_t n, float* out) {
  const size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 4096;
  if (i < n) {
    const float4 v = p[i];
    if (v.x == 12345.f) *out = v.y;
  }
}

// A loop of dependent FMAs per thread: time on the SMs alone, no memory traffic.
__device__ void fma_body(int n, float* out) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 1e-4f;
  for (int i = 0; i < n; ++i) a = fmaf(a, b, c);
  if (a == 12345.f) *out = a;
}

__global__ void fma_loop(int n, float* out) { fma_body(n, out); }

// The FMA loop, its first block's thread 0 recording its cycles and nanoseconds.
__global__ void fma_loop_timed(int n, float* out, unsigned long long* stamps) {
  const bool first = blockIdx.x == 0 && threadIdx.x == 0;
  const unsigned long long c0 = first ? clock64() : 0, g0 = first ? now_ns() : 0;
  fma_body(n, out);
  if (first) {
    const unsigned long long c1 = clock64(), g1 = now_ns();
    stamps[0] = c1 - c0;
    stamps[1] = g1 - g0;
  }
}

// The FMA loop, each block's thread 0 recording (multiprocessor, start ns, end ns).
__global__ void fma_loop_placed(int n, float* out, unsigned long long* rec) {
  const unsigned long long g0 = now_ns();
  fma_body(n, out);
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    rec[3 * blockIdx.x] = sm;
    rec[3 * blockIdx.x + 1] = g0;
    rec[3 * blockIdx.x + 2] = now_ns();
  }
}

// Folds a block that started at g0 and ends now into span = {first start, last end} (span must
// hold {~0, 0} before the launch).
__device__ void fold_span(unsigned long long* span, unsigned long long g0) {
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicMin(&span[0], g0);
    atomicMax(&span[1], now_ns());
  }
}

__global__ void readsum_span(const float4* __restrict__ p, size_t n, float* out,
                             unsigned long long* span) {
  const unsigned long long g0 = now_ns();
  readsum_body(p, n, out);
  fold_span(span, g0);
}

__global__ void fma_loop_span(int n, float* out, unsigned long long* span) {
  const unsigned long long g0 = now_ns();
  fma_body(n, out);
  fold_span(span, g0);
}

// No work, no barrier: the span of the blocks' thread-0 timestamps alone.
__global__ void empty_span(unsigned long long* span) {
  if (threadIdx.x == 0) {
    const unsigned long long g = now_ns();
    atomicMin(&span[0], g);
    atomicMax(&span[1], g);
  }
}

namespace {

bool touch_first = false;  // contexts mode: a touch kernel between the flush and the timed read
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
    if (touch_first)
      touch<<<(bytes / 16 / 4096 + 127) / 128, 128>>>(pool[it % pool.size()], bytes / 16, out);
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

// NVML through dlopen, just what drift mode reads (declarations as in NVML's header).
struct NvmlField {
  unsigned field_id, scope_id;
  long long timestamp, latency_us;
  int value_type, ret;
  union {
    double d;
    unsigned u;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
  } value;
};
struct Nvml {
  void* dev = nullptr;
  int (*clock)(void*, int, unsigned*) = nullptr;
  int (*temp)(void*, int, unsigned*) = nullptr;
  int (*power)(void*, unsigned*) = nullptr;
  int (*fields)(void*, int, NvmlField*) = nullptr;
  bool open() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!lib) return false;
    auto init = (int (*)())dlsym(lib, "nvmlInit_v2");
    auto by_pci = (int (*)(const char*, void**))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    clock = (int (*)(void*, int, unsigned*))dlsym(lib, "nvmlDeviceGetClockInfo");
    temp = (int (*)(void*, int, unsigned*))dlsym(lib, "nvmlDeviceGetTemperature");
    power = (int (*)(void*, unsigned*))dlsym(lib, "nvmlDeviceGetPowerUsage");
    fields = (int (*)(void*, int, NvmlField*))dlsym(lib, "nvmlDeviceGetFieldValues");
    char bus[64] = {};
    cudaDeviceGetPCIBusId(bus, sizeof bus, 0);
    return init && by_pci && init() == 0 && by_pci(bus, &dev) == 0;
  }
  // "sm MHz, mem MHz, gpu C, mem C, W"
  void read(unsigned v[5]) {
    for (int k = 0; k < 5; ++k) v[k] = 0;
    if (!dev) return;
    clock(dev, 1, &v[0]);
    clock(dev, 2, &v[1]);
    temp(dev, 0, &v[2]);
    NvmlField f{};
    f.field_id = 82;  // NVML_FI_DEV_MEMORY_TEMP
    if (fields && fields(dev, 1, &f) == 0 && f.ret == 0) v[3] = f.value.u;
    unsigned mw = 0;
    power(dev, &mw);
    v[4] = mw / 1000;
  }
};

void drift_mode(float4* fl, double seconds, const char* tag) {
  const size_t bytes = size_t{32} << 20;
  const int kPools = 4, kPer = 16;
  rng.seed(13);
  std::vector<std::vector<float4*>> pools;
  for (int k = 0; k < kPools; ++k) {
    pad();
    pools.push_back(make_pool(kPer, bytes));
  }
  Nvml nvml;
  if (!nvml.open()) std::printf("(NVML not available: no clocks or temperatures)\n");
  std::vector<std::vector<float>> all(kPools), sec(kPools);
  std::vector<std::vector<float>> per_second(kPools);  // each second's median, per pool
  std::printf("%s  s  pool medians (us)                   sm MHz mem MHz gpu C mem C   W\n", tag);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  long it = 0;
  for (int second = 1; second <= seconds; ++second) {
    while (elapsed() < second) {
      const int k = it % kPools;
      flush<<<sms * 4, 512>>>(fl, kFlush / 16);
      cudaEventRecord(e0);
      readsum<<<sms * 4, 512>>>(pools[k][(it / kPools) % kPer], bytes / 16, out);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (it >= 3 * kPools) sec[k].push_back(ms * 1000);
      ++it;
    }
    unsigned v[5];
    nvml.read(v);
    std::printf("%s %3d ", tag, second);
    for (int k = 0; k < kPools; ++k) {
      const float m = sec[k].empty() ? 0 : median(sec[k]);
      per_second[k].push_back(m);
      std::printf(" %7.3f", m);
      all[k].insert(all[k].end(), sec[k].begin(), sec[k].end());
      sec[k].clear();
    }
    std::printf("   %6u %7u %5u %5u %3u\n", v[0], v[1], v[2], v[3], v[4]);
  }
  // Placement: the pools' medians over the whole time. Time: the mean over the pools of each
  // second's median, its range over the seconds (and over 10-second means).
  std::vector<float> whole, by_second, by_ten;
  std::vector<float> everything;
  for (int k = 0; k < kPools; ++k) {
    whole.push_back(median(all[k]));
    everything.insert(everything.end(), all[k].begin(), all[k].end());
  }
  const size_t n = per_second[0].size();
  for (size_t s = 0; s < n; ++s) {
    float sum = 0;
    for (int k = 0; k < kPools; ++k) sum += per_second[k][s];
    by_second.push_back(sum / kPools);
  }
  for (size_t s = 0; s + 10 <= n; s += 10) {
    float sum = 0;
    for (size_t j = s; j < s + 10; ++j) sum += by_second[j];
    by_ten.push_back(sum / 10);
  }
  std::printf("%s samples %zu, median over all %.3f us\n", tag, everything.size(),
              median(everything));
  char what[96];
  std::snprintf(what, sizeof what, "%s pools over the whole run (placement)", tag);
  report(what, whole);
  std::snprintf(what, sizeof what, "%s each second, mean over pools (time)", tag);
  report(what, by_second);
  if (by_ten.size() > 1) {
    std::snprintf(what, sizeof what, "%s each 10 s, mean over pools (time)", tag);
    report(what, by_ten);
  }
}

void map_mode(float4* fl, int rounds) {
  const size_t chunk = size_t{1} << 30, bytes = size_t{32} << 20;
  const int per = chunk / bytes;
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  std::vector<char*> chunks;
  while (free_b > (size_t{5} << 30)) {
    char* c = nullptr;
    if (cudaMalloc(&c, chunk) != cudaSuccess) break;
    cudaMemset(c, 0, chunk);
    chunks.push_back(c);
    cudaMemGetInfo(&free_b, &total_b);
  }
  const int n = chunks.size();
  std::printf("map: %d chunks of 1 GiB, %zu MiB left free\n", n, free_b >> 20);
  std::vector<std::vector<float>> even(n), odd(n);
  for (int r = 0; r < rounds; ++r) {
    for (int c = 0; c < n; ++c) {
      std::vector<float4*> bufs;
      for (int j = 0; j < 16; ++j)
        bufs.push_back(reinterpret_cast<float4*>(chunks[c] + ((r * 16 + j) % per) * bytes));
      // sample_us skips its first 3 samples: a fresh chunk's first reads are not counted.
      sample_us(bufs, bytes, fl, 16, r % 2 ? odd[c] : even[c]);
    }
  }
  std::vector<float> all_m, even_m, odd_m;
  for (int c = 0; c < n; ++c) {
    std::vector<float> both = even[c];
    both.insert(both.end(), odd[c].begin(), odd[c].end());
    all_m.push_back(median(both));
    even_m.push_back(median(even[c]));
    odd_m.push_back(median(odd[c]));
    std::printf("chunk %2d (va %p): %.3f us (even rounds %.3f, odd %.3f)\n", c, (void*)chunks[c],
                all_m.back(), even_m.back(), odd_m.back());
  }
  report("map: chunks, all rounds", all_m);
  report("map: chunks, even rounds", even_m);
  report("map: chunks, odd rounds", odd_m);
  // Is a chunk's figure a property of the chunk? Correlation of even- and odd-round medians.
  double me = 0, mo = 0, see = 0, soo = 0, seo = 0;
  for (int c = 0; c < n; ++c) me += even_m[c] / n, mo += odd_m[c] / n;
  for (int c = 0; c < n; ++c) {
    see += (even_m[c] - me) * (even_m[c] - me);
    soo += (odd_m[c] - mo) * (odd_m[c] - mo);
    seo += (even_m[c] - me) * (odd_m[c] - mo);
  }
  std::printf("map: correlation of even- and odd-round chunk medians %.2f\n",
              seo / std::sqrt(see * soo + 1e-30));
  for (auto c : chunks) cudaFree(c);
}

void flush_mode(unsigned seed) {
  const size_t bytes = size_t{32} << 20;
  const int kFlushes = 12, kRounds = 20, kSamples = 30;
  rng.seed(seed);
  const int pads_n = rng() % 32;
  for (int k = 0; k < pads_n; ++k) pad();
  std::vector<float4*> pool = make_pool(64, bytes);
  std::vector<float4*> fls(kFlushes);
  for (auto& f : fls) {
    cudaMalloc(&f, kFlush);
    cudaMemset(f, 0, kFlush);
    pad();
  }
  std::vector<std::vector<float>> even(kFlushes), odd(kFlushes);
  std::vector<float> all;
  int next = 0;  // the pool cycles across flush buffers too
  for (int r = 0; r < kRounds; ++r) {
    for (int f = 0; f < kFlushes; ++f) {
      std::vector<float4*> bufs;
      for (int j = 0; j < kSamples + 3; ++j) bufs.push_back(pool[next++ % pool.size()]);
      std::vector<float> t;
      sample_us(bufs, bytes, fls[f], kSamples, t);
      auto& dst = r % 2 ? odd[f] : even[f];
      dst.insert(dst.end(), t.begin(), t.end());
      all.insert(all.end(), t.begin(), t.end());
    }
  }
  std::vector<float> em, om, m;
  for (int f = 0; f < kFlushes; ++f) {
    em.push_back(median(even[f]));
    om.push_back(median(odd[f]));
    std::vector<float> both = even[f];
    both.insert(both.end(), odd[f].begin(), odd[f].end());
    m.push_back(median(both));
  }
  std::printf("seed %u (%d pads): flush buffers (all rounds)", seed, pads_n);
  for (float v : m) std::printf(" %.3f", v);
  std::printf("\nseed %u: even rounds", seed);
  for (float v : em) std::printf(" %.3f", v);
  std::printf("\nseed %u: odd rounds ", seed);
  for (float v : om) std::printf(" %.3f", v);
  std::printf(
      "\nseed %u: first flush buffer %.3f us, all twelve %.3f us (pool va %p, flush va %p)\n", seed,
      m[0], median(all), (void*)pool[0], (void*)fls[0]);
  report("flush buffers", m);
}

// A fresh primary context with what every mode uses: the multiprocessor count, the scratch
// output, the event pair, and a flush buffer (returned). The context modes end each context with
// cudaDeviceReset, which frees all of it.
float4* open_context() {
  cudaFree(nullptr);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaMalloc(&out, 4);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float4* fl = nullptr;
  cudaMalloc(&fl, kFlush);
  return fl;
}

// One sample: the flush, then `launch` between the event pair; its event time in us.
template <class Launch>
float flushed_sample_us(float4* fl, Launch launch) {
  flush<<<sms * 4, 512>>>(fl, kFlush / 16);
  cudaEventRecord(e0);
  launch();
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  return ms * 1000;
}

// Pearson's correlation of y with x, and the least-squares slope of y on x.
struct Fit {
  double correlation, slope;
};
template <class X, class Y>
Fit fit(const std::vector<X>& x, const std::vector<Y>& y) {
  const size_t n = x.size();
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i] / double(n), my += y[i] / double(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return {sxy / std::sqrt(sxx * syy + 1e-30), sxy / (sxx + 1e-30)};
}

void contexts_mode(int n) {
  const size_t bytes = size_t{32} << 20;
  std::vector<float> m, mt;
  for (int c = 0; c < n; ++c) {
    float4* fl = open_context();
    std::vector<float4*> pool = make_pool(64, bytes);
    touch_first = false;
    m.push_back(median_us(pool, bytes, fl, 3000));
    touch_first = true;
    mt.push_back(median_us(pool, bytes, fl, 3000));
    touch_first = false;
    std::printf("context %d: %.3f us, after a touch every 64 KiB %.3f us (pool va %p)\n", c,
                m.back(), mt.back(), (void*)pool[0]);
    cudaDeviceReset();
  }
  report("contexts", m);
  report("contexts, after a touch", mt);
}

// Per context, one sample of each kind per round, so drift touches every kind alike.
void kinds_mode(int n) {
  const char* names[] = {"empty pair", "read 32 MiB", "read 256 MiB", "fma, no memory"};
  const int kKinds = 4, kRounds = 600;
  std::vector<std::vector<float>> med(kKinds);
  for (int c = 0; c < n; ++c) {
    float4* fl = open_context();
    const size_t small = size_t{32} << 20, large = size_t{256} << 20;
    std::vector<float4*> smalls = make_pool(8, small), larges = make_pool(2, large);
    std::vector<std::vector<float>> t(kKinds);
    for (int r = 0; r < kRounds + 3; ++r) {
      for (int k = 0; k < kKinds; ++k) {
        const float us = flushed_sample_us(fl, [&] {
          if (k == 1) readsum<<<sms * 4, 512>>>(smalls[r % smalls.size()], small / 16, out);
          if (k == 2) readsum<<<sms * 4, 512>>>(larges[r % larges.size()], large / 16, out);
          if (k == 3) fma_loop<<<sms * 4, 512>>>(4096, out);
        });
        if (r >= 3) t[k].push_back(us);
      }
    }
    std::printf("context %2d:", c);
    for (int k = 0; k < kKinds; ++k) {
      med[k].push_back(median(t[k]));
      std::printf(" %s %.3f us;", names[k], med[k].back());
    }
    std::printf("\n");
    cudaDeviceReset();
  }
  // Each kind's spread over the contexts, and how its per-context medians follow the 32 MiB
  // read's.
  for (int k = 0; k < kKinds; ++k) report(names[k], med[k]);
  for (int k = 0; k < kKinds; ++k) {
    const Fit f = fit(med[1], med[k]);
    std::printf("%s: correlation with the 32 MiB read over contexts %.2f, slope %.2f us per us\n",
                names[k], f.correlation, f.slope);
  }
}

void clocks_mode(int n) {
  const int kSamples = 400;
  for (int c = 0; c < n; ++c) {
    float4* fl = open_context();
    unsigned long long* stamps = nullptr;
    cudaMallocHost(&stamps, 2 * sizeof(unsigned long long));
    std::vector<float> ev, cycles, ns, mhz;
    for (int r = 0; r < kSamples + 3; ++r) {
      const float us =
          flushed_sample_us(fl, [&] { fma_loop_timed<<<sms * 4, 512>>>(4096, out, stamps); });
      if (r < 3) continue;
      ev.push_back(us);
      cycles.push_back(static_cast<float>(stamps[0]));
      ns.push_back(static_cast<float>(stamps[1]));
      mhz.push_back(static_cast<float>(1e3 * stamps[0] / static_cast<double>(stamps[1])));
    }
    std::printf(
        "context %2d: events %.3f us; first block %.0f cycles in %.0f ns, %.1f MHz (medians)\n", c,
        median(ev), median(cycles), median(ns), median(mhz));
    cudaFreeHost(stamps);
    cudaDeviceReset();
  }
}

void smid_mode(int n) {
  const int kSamples = 200;
  std::vector<unsigned long long> first_placement;  // context 0's first call
  for (int c = 0; c < n; ++c) {
    float4* fl = open_context();
    const int blocks = sms * 4;
    unsigned long long* rec = nullptr;
    cudaMalloc(&rec, 3 * sizeof(unsigned long long) * blocks);
    std::vector<unsigned long long> h(3 * blocks), mine;
    std::vector<float> ev, span;
    int same_as_own_first = 0, same_as_context0 = 0, most = 0;
    for (int r = 0; r < kSamples + 3; ++r) {
      const float us =
          flushed_sample_us(fl, [&] { fma_loop_placed<<<blocks, 512>>>(4096, out, rec); });
      if (r < 3) continue;
      cudaMemcpy(h.data(), rec, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost);
      std::vector<unsigned long long> placement(blocks);
      std::vector<int> per_sm(sms, 0);
      unsigned long long lo = ~0ull, hi = 0;
      for (int b = 0; b < blocks; ++b) {
        placement[b] = h[3 * b];
        if (h[3 * b] < static_cast<unsigned long long>(sms)) ++per_sm[h[3 * b]];
        lo = std::min(lo, h[3 * b + 1]);
        hi = std::max(hi, h[3 * b + 2]);
      }
      most = std::max(most, *std::max_element(per_sm.begin(), per_sm.end()));
      if (mine.empty()) mine = placement;
      if (first_placement.empty()) first_placement = placement;
      same_as_own_first += placement == mine;
      same_as_context0 += placement == first_placement;
      ev.push_back(us);
      span.push_back((hi - lo) / 1000.f);
    }
    std::printf(
        "context %d: events %.3f us, blocks' span %.3f us (medians); at most %d blocks on one "
        "multiprocessor; placement as its own first call %d/%d, as context 0's first %d/%d; "
        "blocks 0-3 on SMs %llu %llu %llu %llu\n",
        c, median(ev), median(span), most, same_as_own_first, kSamples, same_as_context0, kSamples,
        mine[0], mine[1], mine[2], mine[3]);
    cudaFree(rec);
    cudaDeviceReset();
  }
}

void span_mode(int n) {
  const char* names[] = {"read 32 MiB", "read 256 MiB", "fma, no memory", "empty kernel"};
  const int kKinds = 4, kRounds = 400;
  std::vector<std::vector<float>> ev_m(kKinds), span_m(kKinds);
  for (int c = 0; c < n; ++c) {
    float4* fl = open_context();
    const size_t small = size_t{32} << 20, large = size_t{256} << 20;
    std::vector<float4*> smalls = make_pool(8, small), larges = make_pool(2, large);
    unsigned long long* span = nullptr;
    cudaMalloc(&span, 2 * sizeof(unsigned long long));
    const unsigned long long init[2] = {~0ull, 0};
    std::vector<std::vector<float>> ev(kKinds), sp(kKinds);
    for (int r = 0; r < kRounds + 3; ++r) {
      for (int k = 0; k < kKinds; ++k) {
        cudaMemcpy(span, init, sizeof init, cudaMemcpyHostToDevice);
        const float us = flushed_sample_us(fl, [&] {
          if (k == 0) readsum_span<<<sms * 4, 512>>>(smalls[r % 8], small / 16, out, span);
          if (k == 1) readsum_span<<<sms * 4, 512>>>(larges[r % 2], large / 16, out, span);
          if (k == 2) fma_loop_span<<<sms * 4, 512>>>(4096, out, span);
          if (k == 3) empty_span<<<sms * 4, 512>>>(span);
        });
        unsigned long long h[2];
        cudaMemcpy(h, span, sizeof h, cudaMemcpyDeviceToHost);
        if (r < 3) continue;
        ev[k].push_back(us);
        sp[k].push_back((h[1] - h[0]) / 1000.f);
      }
    }
    std::printf("context %2d:", c);
    for (int k = 0; k < kKinds; ++k) {
      ev_m[k].push_back(median(ev[k]));
      span_m[k].push_back(median(sp[k]));
      std::printf(" %s: events %.3f, span %.3f us;", names[k], ev_m[k].back(), span_m[k].back());
    }
    std::printf("\n");
    cudaDeviceReset();
  }
  for (int k = 0; k < kKinds; ++k) {
    char what[96];
    std::snprintf(what, sizeof what, "%s, events", names[k]);
    report(what, ev_m[k]);
    std::snprintf(what, sizeof what, "%s, blocks' span", names[k]);
    report(what, span_m[k]);
  }
  // What lies around the blocks (events less span) per context, against the empty kernel's
  // event time: does an empty kernel of the same grid carry the context's offset?
  for (int k = 0; k < 3; ++k) {
    std::vector<double> around;
    double mean = 0;
    for (int c = 0; c < n; ++c) {
      around.push_back(ev_m[k][c] - span_m[k][c]);
      mean += around.back() / n;
    }
    std::printf("%s: events less span %.3f us on average, per context", names[k], mean);
    for (double v : around) std::printf(" %.3f", v);
    std::printf("; correlation with the empty kernel's time %.2f\n",
                fit(ev_m[3], around).correlation);
  }
}

constexpr int kBatch = 8;  // samples queued per batch by queued_batch

// One batch on stream `st`: kBatch x (flush, start event, launch(b), end event) with the event
// pairs ev[2b], ev[2b + 1], then `finish()` enqueued (a copy back of what the kernels recorded)
// and the stream synchronized; the event times in us are appended to `t`.
template <class Launch, class Finish>
void queued_batch(float4* fl, cudaStream_t st, const cudaEvent_t* ev, Launch launch, Finish finish,
                  std::vector<float>& t) {
  for (int b = 0; b < kBatch; ++b) {
    flush<<<sms * 4, 512, 0, st>>>(fl, kFlush / 16);
    cudaEventRecord(ev[2 * b], st);
    launch(b);
    cudaEventRecord(ev[2 * b + 1], st);
  }
  finish();
  cudaStreamSynchronize(st);
  for (int b = 0; b < kBatch; ++b) {
    float ms = 0;
    cudaEventElapsedTime(&ms, ev[2 * b], ev[2 * b + 1]);
    t.push_back(ms * 1000);
  }
}

// Queued samples on the legacy stream: rounds of prepare(), then a batch, the first round a
// warmup left out; event times in us appended to `t`. `after(b, us)` runs once each kept batch
// is done (to read what the kernels recorded).
template <class Prepare, class Launch, class After>
void queued_samples(float4* fl, int rounds, Prepare prepare, Launch launch, After after,
                    std::vector<float>& t) {
  std::vector<cudaEvent_t> ev(2 * kBatch);
  for (auto& e : ev) cudaEventCreate(&e);
  std::vector<float> batch;
  for (int r = 0; r < rounds + 1; ++r) {
    prepare();
    batch.clear();
    queued_batch(
        fl, 0, ev.data(), launch, [] {}, batch);
    if (r == 0) continue;  // warmup
    for (int b = 0; b < kBatch; ++b) {
      t.push_back(batch[b]);
      after(b, batch[b]);
    }
  }
  for (auto e : ev) cudaEventDestroy(e);
}

// Per context: streams x event sets, each cell a batch of kBatch queued samples (flush, start
// event, kernel, end event), so launches are queued as in fib's timer. Reports each cell's median
// event time and events-less-span (read kernel), then compares the spread over streams and over
// event sets inside a context with the spread of the context means.
void streams_mode(int n) {
  const int kStreams = 4, kSets = 3, kRounds = 40;
  const char* names[] = {"read 32 MiB", "fma, no memory"};
  const size_t small = size_t{32} << 20;
  // [kind][context][stream][set] medians; for the read also events less span.
  std::vector<float> cell(2 * n * kStreams * kSets), around(n * kStreams * kSets);
  auto at = [&](int k, int c, int s, int e) { return ((k * n + c) * kStreams + s) * kSets + e; };
  for (int c = 0; c < n; ++c) {
    float4* fl = open_context();
    std::vector<float4*> smalls = make_pool(8, small);
    std::vector<cudaStream_t> streams(kStreams);
    for (auto& st : streams) cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    std::vector<cudaEvent_t> ev(2 * kBatch * kSets);
    for (auto& e : ev) cudaEventCreate(&e);
    unsigned long long* spans = nullptr;  // per sample of a batch: {first start, last end}
    cudaMalloc(&spans, 2 * kBatch * sizeof(unsigned long long));
    std::vector<unsigned long long> init(2 * kBatch), h(2 * kBatch);
    for (int b = 0; b < kBatch; ++b) init[2 * b] = ~0ull, init[2 * b + 1] = 0;
    std::vector<std::vector<float>> t(2 * kStreams * kSets), a(kStreams * kSets);
    std::vector<float> batch;
    for (int r = 0; r < kRounds + 1; ++r) {
      for (int k = 0; k < 2; ++k) {
        for (int s = 0; s < kStreams; ++s) {
          for (int e = 0; e < kSets; ++e) {
            cudaStream_t st = streams[s];
            cudaMemcpyAsync(spans, init.data(), init.size() * sizeof(init[0]),
                            cudaMemcpyHostToDevice, st);
            batch.clear();
            queued_batch(
                fl, st, &ev[2 * kBatch * e],
                [&](int b) {
                  if (k == 0) {
                    readsum_span<<<sms * 4, 512, 0, st>>>(smalls[(r + b) % 8], small / 16, out,
                                                          spans + 2 * b);
                  } else {
                    fma_loop<<<sms * 4, 512, 0, st>>>(4096, out);
                  }
                },
                [&] {
                  cudaMemcpyAsync(h.data(), spans, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost,
                                  st);
                },
                batch);
            if (r == 0) continue;  // the warmup round
            for (int b = 0; b < kBatch; ++b) {
              t[(k * kStreams + s) * kSets + e].push_back(batch[b]);
              if (k == 0) a[s * kSets + e].push_back(batch[b] - (h[2 * b + 1] - h[2 * b]) / 1000.f);
            }
          }
        }
      }
    }
    std::printf("context %d:", c);
    for (int k = 0; k < 2; ++k) {
      std::printf(" %s [", names[k]);
      for (int s = 0; s < kStreams; ++s) {
        for (int e = 0; e < kSets; ++e) {
          cell[at(k, c, s, e)] = median(t[(k * kStreams + s) * kSets + e]);
          std::printf(" %.3f", cell[at(k, c, s, e)]);
        }
        std::printf(s + 1 < kStreams ? " |" : " ]");
      }
    }
    std::printf(" around the read's blocks [");
    for (int s = 0; s < kStreams; ++s)
      for (int e = 0; e < kSets; ++e) {
        around[(c * kStreams + s) * kSets + e] = median(a[s * kSets + e]);
        std::printf(" %.3f", around[(c * kStreams + s) * kSets + e]);
      }
    std::printf(" ] us\n");
    cudaDeviceReset();
  }
  // Spreads in us: of the context means; within each context, of the stream means (over event
  // sets) and of the event-set means (over streams); all as a percentage of the kind's median.
  for (int k = 0; k < 3; ++k) {
    auto v = [&](int c, int s, int e) {
      return k < 2 ? cell[at(k, c, s, e)] : around[(c * kStreams + s) * kSets + e];
    };
    std::vector<float> ctx;
    float worst_stream = 0, worst_set = 0, mean_stream = 0, mean_set = 0;
    for (int c = 0; c < n; ++c) {
      float sum = 0;
      std::vector<float> sm(kStreams, 0), em(kSets, 0);
      for (int s = 0; s < kStreams; ++s)
        for (int e = 0; e < kSets; ++e) {
          sum += v(c, s, e);
          sm[s] += v(c, s, e) / kSets;
          em[e] += v(c, s, e) / kStreams;
        }
      ctx.push_back(sum / (kStreams * kSets));
      const float ds =
          *std::max_element(sm.begin(), sm.end()) - *std::min_element(sm.begin(), sm.end());
      const float de =
          *std::max_element(em.begin(), em.end()) - *std::min_element(em.begin(), em.end());
      worst_stream = std::max(worst_stream, ds), worst_set = std::max(worst_set, de);
      mean_stream += ds / n, mean_set += de / n;
    }
    const float dc =
        *std::max_element(ctx.begin(), ctx.end()) - *std::min_element(ctx.begin(), ctx.end());
    std::printf(
        "%s: context means spread %.3f us; within a context, stream means spread %.3f us on "
        "average (at most %.3f), event-set means %.3f us (at most %.3f)\n",
        k < 2 ? names[k] : "around the read's blocks", dc, mean_stream, worst_stream, mean_set,
        worst_set);
  }
}

// A context's launch margin: the median of (event time less the blocks' span) of the 32 MiB
// read over `pool` (8 buffers), in queued batches of 8 after the flush; us.
float launch_margin(float4* fl, const std::vector<float4*>& pool, int rounds) {
  const size_t bytes = size_t{32} << 20;
  unsigned long long* spans = nullptr;  // per sample of a batch: {first start, last end}
  cudaMalloc(&spans, 16 * sizeof(unsigned long long));
  unsigned long long init[16], h[16];
  for (int b = 0; b < 8; ++b) init[2 * b] = ~0ull, init[2 * b + 1] = 0;
  std::vector<float> t, a;
  queued_samples(
      fl, rounds, [&] { cudaMemcpy(spans, init, sizeof init, cudaMemcpyHostToDevice); },
      [&](int b) { readsum_span<<<sms * 4, 512>>>(pool[b], bytes / 16, out, spans + 2 * b); },
      [&](int b, float us) {
        if (b == 0) cudaMemcpy(h, spans, sizeof h, cudaMemcpyDeviceToHost);
        a.push_back(us - (h[2 * b + 1] - h[2 * b]) / 1000.f);
      },
      t);
  cudaFree(spans);
  return median(a);
}

// The calls calib and scratch modes time: (name, launch of sample b).
const char* kVictimNames[] = {"fma, full grid", "fma, 8 blocks", "fma, 1 thread", "read + fma",
                              "read 8 MiB"};
constexpr int kVictims = 5;
void launch_victim(int k, int b, const std::vector<float4*>& smalls,
                   const std::vector<float4*>& tinies) {
  const size_t small = size_t{32} << 20, tiny = size_t{8} << 20;
  if (k == 0) fma_loop<<<sms * 4, 512>>>(4096, out);
  if (k == 1) fma_loop<<<8, 128>>>(8192, out);
  if (k == 2) fma_loop<<<1, 1>>>(8192, out);
  if (k == 3) {
    readsum<<<sms * 4, 512>>>(smalls[b], small / 16, out);
    fma_loop<<<8, 128>>>(4096, out);
  }
  if (k == 4) readsum<<<sms * 4, 512>>>(tinies[b], tiny / 16, out);
}

// Each victim's median over `rounds` x 5 batches, the victims interleaved.
std::vector<float> victim_medians(float4* fl, int rounds, const std::vector<float4*>& smalls,
                                  const std::vector<float4*>& tinies) {
  std::vector<std::vector<float>> t(kVictims);
  for (int r = 0; r < rounds; ++r)
    for (int k = 0; k < kVictims; ++k)
      queued_samples(
          fl, 5, [] {}, [&](int b) { launch_victim(k, b, smalls, tinies); }, [](int, float) {},
          t[k]);
  std::vector<float> m;
  for (auto& x : t) m.push_back(median(x));
  return m;
}

void calib_mode(int n) {
  const char** names = kVictimNames;
  const int kRounds = 50;
  std::vector<float> m0, m1;                    // margins per context, start and end
  std::vector<std::vector<float>> v(kVictims);  // victims' medians per context
  for (int c = 0; c < n; ++c) {
    float4* fl = open_context();
    std::vector<float4*> smalls = make_pool(8, size_t{32} << 20),
                         tinies = make_pool(8, size_t{8} << 20);
    auto margin = [&] { return launch_margin(fl, smalls, kRounds); };
    m0.push_back(margin());
    const std::vector<float> vm = victim_medians(fl, kRounds / 5, smalls, tinies);
    m1.push_back(margin());
    std::printf("context %2d: margin %.3f us, at the end %.3f;", c, m0.back(), m1.back());
    for (int k = 0; k < kVictims; ++k) {
      v[k].push_back(vm[k]);
      std::printf(" %s %.3f;", names[k], v[k].back());
    }
    std::printf("\n");
    cudaDeviceReset();
  }
  report("margin at the start", m0);
  report("margin at the end", m1);
  std::printf("margin, end less start: correlation over contexts %.2f\n", fit(m0, m1).correlation);
  for (int k = 0; k < kVictims; ++k) {
    std::vector<float> corrected;
    for (int c = 0; c < n; ++c) corrected.push_back(v[k][c] - m0[c]);
    const auto mm = std::minmax_element(v[k].begin(), v[k].end());
    const auto cm = std::minmax_element(corrected.begin(), corrected.end());
    const Fit f = fit(m0, v[k]);
    std::printf(
        "%s: medians spread %.3f us (%.2f%%), less the context's margin %.3f us (%.2f%%); "
        "correlation with the margin %.2f, slope %.2f\n",
        names[k], *mm.second - *mm.first, 100 * (*mm.second - *mm.first) / median(v[k]),
        *cm.second - *cm.first, 100 * (*cm.second - *cm.first) / median(v[k]), f.correlation,
        f.slope);
  }
}

// The driver's context calls through the runtime's entry points (no link to libcuda).
struct DriverContexts {
  using Create = CUresult (*)(CUcontext*, unsigned, CUdevice);
  using Destroy = CUresult (*)(CUcontext);
  Create create = nullptr;
  Destroy destroy = nullptr;
  DriverContexts() {
    cudaDriverEntryPointQueryResult q;
    cudaGetDriverEntryPointByVersion("cuCtxCreate", reinterpret_cast<void**>(&create), 3020,
                                     cudaEnableDefault, &q);
    cudaGetDriverEntryPointByVersion("cuCtxDestroy", reinterpret_cast<void**>(&destroy), 4000,
                                     cudaEnableDefault, &q);
  }
};

void scratch_mode(int n, int k) {
  const int kRounds = 50;
  DriverContexts drv;
  std::vector<float> mp, delta, cost;
  std::vector<std::vector<float>> v(kVictims);
  for (int c = 0; c < n; ++c) {
    float4* fl = open_context();
    std::vector<float4*> smalls = make_pool(8, size_t{32} << 20),
                         tinies = make_pool(8, size_t{8} << 20);
    mp.push_back(launch_margin(fl, smalls, kRounds));
    float* own_out = out;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> ms;
    for (int j = 0; j < k; ++j) {
      CUcontext ctx = nullptr;
      if (!drv.create || drv.create(&ctx, 0, 0) != CUDA_SUCCESS) {
        std::printf("cuCtxCreate failed\n");
        return;
      }
      cudaMalloc(&out, 4);
      float4* sfl = nullptr;
      cudaMalloc(&sfl, kFlush);
      ms.push_back(launch_margin(sfl, make_pool(8, size_t{32} << 20), 25));
      drv.destroy(ctx);  // frees its memory and pops it: the primary is current again
    }
    out = own_out;
    cost.push_back(std::chrono::duration<float>(std::chrono::steady_clock::now() - t0).count());
    delta.push_back(mp.back() - median(ms));
    const std::vector<float> vm = victim_medians(fl, kRounds / 5, smalls, tinies);
    std::printf("primary %d: margin %.3f us; scratch margins", c, mp.back());
    for (float x : ms) std::printf(" %.3f", x);
    std::printf(" (%.2f s); correction %.3f us;", cost.back(), delta.back());
    for (int i = 0; i < kVictims; ++i) {
      v[i].push_back(vm[i]);
      std::printf(" %s %.3f;", kVictimNames[i], vm[i]);
    }
    std::printf("\n");
    cudaDeviceReset();
  }
  report("primary margins", mp);
  float mean_mp = 0;
  for (float x : mp) mean_mp += x / n;
  auto spread = [](std::vector<float> x) {
    const auto mm = std::minmax_element(x.begin(), x.end());
    return *mm.second - *mm.first;
  };
  for (int i = 0; i < kVictims; ++i) {
    std::vector<float> corr, oracle;
    for (int c = 0; c < n; ++c) {
      corr.push_back(v[i][c] - delta[c]);
      oracle.push_back(v[i][c] - (mp[c] - mean_mp));
    }
    const float med = median(v[i]);
    std::printf(
        "%s: spread over primaries %.3f us (%.2f%%); corrected by the scratch median %.3f us "
        "(%.2f%%); by the primaries' mean margin %.3f us (%.2f%%)\n",
        kVictimNames[i], spread(v[i]), 100 * spread(v[i]) / med, spread(corr),
        100 * spread(corr) / med, spread(oracle), 100 * spread(oracle) / med);
  }
}

void steps_mode(double seconds) {
  Nvml nvml;
  if (!nvml.open()) std::printf("(NVML not available: no clocks or temperatures)\n");
  unsigned long long* stamps = nullptr;
  cudaMallocHost(&stamps, 2 * sizeof(unsigned long long));
  cudaEvent_t l0, l1;
  cudaEventCreate(&l0);
  cudaEventCreate(&l1);
  std::vector<float> win_loop, win_mhz, win_load;
  std::printf("   t  phase  load us  loop us  implied MHz  nvml MHz   W  gpu C\n");
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (double w = 0.5; w <= seconds; w += 0.5) {
    const bool busy = std::fmod(w - 0.25, 10.0) < 5.0;
    std::vector<float> loop, mhz, load;
    while (elapsed() < w) {
      if (busy) {
        cudaEventRecord(l0);
        fma_loop<<<sms * 4, 512>>>(409600, out);
        cudaEventRecord(l1);
      } else {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, nullptr);
      }
      for (int i = 0; i < 4; ++i) {
        cudaEventRecord(e0);
        fma_loop_timed<<<sms * 4, 512>>>(4096, out, stamps);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        loop.push_back(ms * 1000);
        mhz.push_back(static_cast<float>(1e3 * stamps[0] / static_cast<double>(stamps[1])));
      }
      if (busy) {
        float ms = 0;
        cudaEventElapsedTime(&ms, l0, l1);
        load.push_back(ms * 1000);
      }
    }
    unsigned v[5];
    nvml.read(v);
    win_loop.push_back(median(loop));
    win_mhz.push_back(median(mhz));
    if (busy) win_load.push_back(median(load));
    std::printf("%5.1f  %-5s %8.1f %8.3f %12.1f %9u %3u %5u\n", w, busy ? "busy" : "light",
                busy ? median(load) : 0.f, win_loop.back(), win_mhz.back(), v[0], v[4], v[2]);
  }
  report("44 us loop, half-second medians", win_loop);
  report("4.4 ms load, half-second medians", win_load);
  const Fit f = fit(win_mhz, win_loop);
  std::printf("loop time against implied MHz over windows: correlation %.2f, slope %.4f us/MHz\n",
              f.correlation, f.slope);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "buffer";
  // The modes that make their own contexts, with their default context counts.
  const struct {
    const char* name;
    void (*run)(int);
    int contexts;
  } context_modes[] = {{"contexts", contexts_mode, 8}, {"kinds", kinds_mode, 12},
                       {"clocks", clocks_mode, 10},    {"smid", smid_mode, 8},
                       {"span", span_mode, 10},        {"streams", streams_mode, 6},
                       {"calib", calib_mode, 12}};
  if (std::strcmp(mode, "scratch") == 0) {
    scratch_mode(argc > 2 ? std::atoi(argv[2]) : 8, argc > 3 ? std::atoi(argv[3]) : 8);
    return 0;
  }
  for (const auto& m : context_modes) {
    if (std::strcmp(mode, m.name) == 0) {
      m.run(argc > 2 ? std::atoi(argv[2]) : m.contexts);
      return 0;
    }
  }
  if (std::strcmp(mode, "hold") == 0) {
    cudaFree(nullptr);
    std::printf("holding a context\n");
    std::fflush(stdout);
    struct timespec ts = {argc > 2 ? std::atoi(argv[2]) : 120, 0};
    nanosleep(&ts, nullptr);
    return 0;
  }
  cudaFree(nullptr);  // the primary context, which vmm mode's driver API calls use
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaMalloc(&out, 4);
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  if (std::strcmp(mode, "steps") == 0) {
    steps_mode(argc > 2 ? std::atof(argv[2]) : 60);
    return 0;
  }
  if (std::strcmp(mode, "flush") == 0) {
    flush_mode(argc > 2 ? std::atoi(argv[2]) : 1);
    return 0;
  }
  if (std::strcmp(mode, "map") == 0) {
    float4* fl = nullptr;
    cudaMalloc(&fl, kFlush);
    map_mode(fl, argc > 2 ? std::atoi(argv[2]) : 40);
    return 0;
  }
  if (std::strcmp(mode, "drift") == 0) {
    float4* fl = nullptr;
    cudaMalloc(&fl, kFlush);
    drift_mode(fl, argc > 2 ? std::atof(argv[2]) : 40, argc > 3 ? argv[3] : "drift");
    return 0;
  }
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
