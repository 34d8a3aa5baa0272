// sampling on the GPU (top_k, top_p, top_k_top_p sampling from probs): the CPU reference's
// distribution and draw (src/reference/sampling.cpp, fib/reference/sampling.h), reproduced
// bit for bit:
//   - the masks: top_k keeps the k first tokens in (probability descending, index ascending)
//     order; top_p sorts the current row the same way, accumulates the cdf in double rounded to
//     float per token, and keeps tokens up to and including the first whose cdf exceeds p;
//     p <= 0 is a one-hot at the first maximal index; top_k first, then top_p on the
//     renormalized row;
//   - every sum the CPU takes in double in one serial order (renormalizing sums in token order,
//     the cdf in sorted order, the final normalization, the draw's inverse CDF) is taken here in
//     the same order, as one serial chain: adding 0 is exact, so only the nonzero entries are
//     visited, compacted span by span in shared memory and added by one thread;
//   - the draw: u = splitmix64(seed ^ splitmix64(row)) as 53 bits, the first token whose
//     cumulative probability exceeds u * total.
// So the distribution equals the CPU's and, for the same seed, so do the samples. Each call
// sorts once: one stable radix sort over all rows (key: row, then the probability's bits
// inverted), before top_k or, without top_k, before top_p; after top_k, top_p walks the same
// order (cut_inside_run says why that gives the reference's kept set).
// A row that is not a distribution (negative, NaN or infinite entries, nothing left with
// positive mass), where the CPU reference throws, gets NaN probabilities and sample -1: the
// device cannot throw, and run() does not wait for its kernels.
#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>

#include "reference_cuda/core_util.cuh"
#include "reference_cuda/kernels.h"

namespace fib::reference_cuda {

namespace detail {

namespace {

using device::Code;

constexpr int kThreads = 512;  // threads of the per-row kernels
constexpr int kPer = 8;        // consecutive positions per thread in one span of a serial pass
constexpr int kSpan = kThreads * kPer;

// Shared memory of visit_in_order: one span's nonzero entries, compacted in position order.
struct Ordered {
  float v[kSpan];
  unsigned short off[kSpan];  // position - the span's first
  int warp_off[kThreads / 32];
  int total;
  int stop;
};
static_assert(kSpan <= 65536, "span offsets are 16-bit");

// Calls visit(value, position) on thread 0 for every nonzero get(position), position in
// [0, n) ascending, until visit returns true. All threads of the block must call it; the visitor
// state that matters is thread 0's.
//
// The rows these passes walk are mostly zeros after top-k or top-p, so the cost is the walk,
// not the visits: each span of kSpan positions is loaded at once (kPer consecutive positions per
// thread, all loads in flight together), its nonzero entries are compacted in order with one
// block-wide count, and thread 0 visits them. A span costs a few barriers whatever it holds.
template <class Get, class Visit>
__device__ void visit_in_order(std::int64_t n, const Get& get, Visit& visit, Ordered& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kWarps = kThreads / 32;
  for (std::int64_t base = 0; base < n; base += kSpan) {
    const int first = static_cast<int>(threadIdx.x) * kPer;  // this thread's first offset
    float v[kPer];
    int count = 0;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const std::int64_t j = base + first + k;
      v[k] = j < n ? get(j) : 0.0f;
      count += v[k] != 0.0f;
    }
    // Exclusive prefix of the counts over the block, in thread order.
    int incl = count;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    if (lane == 31) sh.warp_off[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const int c = lane < kWarps ? sh.warp_off[lane] : 0;
      int w = c;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w += y;
      }
      __syncwarp();
      if (lane < kWarps) sh.warp_off[lane] = w - c;
      if (lane == 31) sh.total = w;
    }
    __syncthreads();
    const int total = sh.total;
    if (total == 0) continue;  // warp_off and total are rewritten only past the next barrier
    int pos = sh.warp_off[warp] + incl - count;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      if (v[k] != 0.0f) {
        sh.v[pos] = v[k];
        sh.off[pos] = static_cast<unsigned short>(first + k);
        ++pos;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int stop = 0;
      for (int q = 0; q < total; ++q) {
        if (visit(sh.v[q], base + sh.off[q])) {
          stop = 1;
          break;
        }
      }
      sh.stop = stop;
    }
    __syncthreads();
    if (sh.stop) break;
  }
}

struct RowGet {
  const float* row;
  __device__ float operator()(std::int64_t j) const { return row[j]; }
};

// The probability at sorted position j of a row: the row read through its sort order.
struct IndexedGet {
  const float* row;
  const int* order;
  __device__ float operator()(std::int64_t j) const { return row[order[j]]; }
};

struct SumVisit {
  double sum = 0;
  __device__ bool operator()(float v, std::int64_t) {
    sum += static_cast<double>(v);
    return false;
  }
};

// The reference's `cdf > p` mask shifted right by one: `keep` counts the sorted positions kept.
struct TopPVisit {
  float p;
  bool unshifted;  // top_k_top_p at vocab 1 skips the shift
  double cum = 0;
  float prev_cdf = 0.0f;
  std::int64_t keep = 0;
  __device__ bool operator()(float v, std::int64_t j) {
    cum += static_cast<double>(v);
    const auto cdf = static_cast<float>(cum);
    const bool removed = j == 0 ? (unshifted && cdf > p) : prev_cdf > p;
    if (removed) return true;
    keep = j + 1;
    prev_cdf = cdf;
    return false;
  }
};

struct DrawVisit {
  double target;
  double cum = 0;
  std::int64_t last = -1;
  __device__ bool operator()(float v, std::int64_t i) {
    cum += static_cast<double>(v);
    last = i;
    return cum > target;
  }
};

__device__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// top_k as the CPU reads it (an integer; a float tensor truncates).
__device__ std::int64_t load_k(const void* base, std::int64_t r, Code t) {
  const auto d = static_cast<DType>(t);
  if (d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16)
    return static_cast<std::int64_t>(device::load_float(base, r, t));
  return device::load_index(base, r, t);
}

// The row as fp32 (work), checked (status 1 where an entry is not a probability), and the sort
// inputs: key = row << 32 | ~bits(value) (so ascending keys are descending values; -0 is +0),
// value = the token index.
__global__ void load_rows(const void* probs, Code probs_t, float* work, int* status,
                          std::int64_t batch, std::int64_t vocab) {
  const std::int64_t n = batch * vocab;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = device::load_float(probs, e, probs_t);
    work[e] = v;
    if (!(v >= 0.0f) || !isfinite(v)) status[e / vocab] = 1;
  }
}

__global__ void make_keys(const float* work, std::uint64_t* keys, int* idx, std::int64_t batch,
                          std::int64_t vocab) {
  const std::int64_t n = batch * vocab;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = work[e];
    const unsigned bits = v == 0.0f ? 0u : __float_as_uint(v);
    keys[e] = (static_cast<std::uint64_t>(e / vocab) << 32) | (0xffffffffu - bits);
    idx[e] = static_cast<int>(e % vocab);
  }
}

// One pass of the block over a row's [0, n): load(i) for kUnroll positions per thread, all in
// flight together, then use(i, loaded) for each. One block walks a whole row, so a pass issuing
// one load at a time per thread waits out the memory latency vocab / blockDim times.
constexpr int kUnroll = 8;
template <class T, class Load, class Use>
__device__ void row_pass(std::int64_t n, const Load& load, const Use& use) {
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x);
  for (std::int64_t base = threadIdx.x; base < n; base += step * kUnroll) {
    T x[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::int64_t i = base + k * step;
      if (i < n) x[k] = load(i);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const std::int64_t i = base + k * step;
      if (i < n) use(i, x[k]);
    }
  }
}

// A run of sorted positions [run, run_end) that the top-p cut splits (cut_inside_run): of it,
// the tokens up to index `limit` are kept. run < 0: none, the first `keep` positions are kept.
struct RunCut {
  std::int64_t run = -1, run_end = 0;
  int limit = 0;
};

// Keeps the first `keep` sorted tokens of the row (or, with a split run, the positions before
// it and the run's tokens up to cut.limit), zeroes the others and renormalizes: the sum in
// double in token order, rounded to float, each value divided by it. `mask` is zero on entry
// and on exit.
__device__ void keep_and_renormalize(float* row, unsigned char* mask, const int* sorted_idx,
                                     std::int64_t keep, std::int64_t vocab, int* status,
                                     Ordered& sh, const RunCut& cut = RunCut{}) {
  __shared__ float s_sum;
  const bool split = cut.run >= 0;
  const std::int64_t whole = split ? cut.run : keep;  // positions kept whatever their index
  for (std::int64_t j = threadIdx.x; j < whole; j += blockDim.x) mask[sorted_idx[j]] = 1;
  for (std::int64_t j = whole + threadIdx.x; split && j < cut.run_end; j += blockDim.x) {
    if (sorted_idx[j] <= cut.limit) mask[sorted_idx[j]] = 1;
  }
  __syncthreads();
  row_pass<unsigned char>(
      vocab, [&](std::int64_t i) { return mask[i]; },
      [&](std::int64_t i, unsigned char m) {
        if (!m) row[i] = 0.0f;
        mask[i] = 0;
      });
  __syncthreads();
  SumVisit sum;
  visit_in_order(vocab, RowGet{row}, sum, sh);
  if (threadIdx.x == 0) s_sum = static_cast<float>(sum.sum);
  __syncthreads();
  const float s = s_sum;
  if (!(s > 0.0f) || !isfinite(s)) {
    if (threadIdx.x == 0) *status = 1;
    return;
  }
  row_pass<float>(
      vocab, [&](std::int64_t i) { return row[i]; },
      [&](std::int64_t i, float x) { row[i] = __fdiv_rn(x, s); });
}

// How many of positions [lo, hi) satisfy pred, over the block (every thread gets the count).
template <class Pred>
__device__ std::int64_t block_count(std::int64_t lo, std::int64_t hi, const Pred& pred) {
  __shared__ unsigned long long s_count;
  if (threadIdx.x == 0) s_count = 0;
  __syncthreads();
  unsigned long long c = 0;
  row_pass<int>(
      hi > lo ? hi - lo : 0, [&](std::int64_t i) { return pred(lo + i) ? 1 : 0; },
      [&](std::int64_t, int x) { c += static_cast<unsigned long long>(x); });
  for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
  if ((threadIdx.x & 31) == 0 && c) atomicAdd(&s_count, c);
  __syncthreads();
  const auto total = static_cast<std::int64_t>(s_count);
  __syncthreads();  // read by all before the next call resets it
  return total;
}

// The top-p cut when the order is the one sorted before top_k renormalized the row. Dividing by
// the sum never reverses two values but can make different ones equal, and the reference sorts
// the renormalized row again, equal values by ascending index. The values along the old order
// are therefore the new order's values, so the cdf, and the number of positions kept, are the
// same; only which tokens are kept differs, and only where the cut falls inside a run of equal
// values that is not in index order: there the reference keeps the run's lowest indices.
// Returns no run (run < 0) when the first `keep` positions are the reference's kept set.
__device__ RunCut cut_inside_run(const float* row, const int* order, std::int64_t keep,
                                 std::int64_t vocab) {
  __shared__ float s_v;
  __shared__ int s_inside;
  if (threadIdx.x == 0) {
    s_inside = 0;
    if (keep >= 1 && keep < vocab) {
      s_v = row[order[keep - 1]];
      s_inside = s_v != 0.0f && row[order[keep]] == s_v;
    }
  }
  __syncthreads();
  RunCut cut;
  if (!s_inside) return cut;
  const float v = s_v;
  // Values never increase along the order: the run is the positions holding v.
  const std::int64_t a = block_count(0, keep, [&](std::int64_t j) { return row[order[j]] > v; });
  const std::int64_t b =
      keep + block_count(keep, vocab, [&](std::int64_t j) { return row[order[j]] == v; });
  const bool sorted =
      block_count(a, b - 1, [&](std::int64_t j) { return order[j] > order[j + 1]; }) == 0;
  if (sorted) return cut;
  // The (keep - a)-th smallest index of the run: the least t with that many indices <= t.
  int lo = 0, hi = static_cast<int>(vocab) - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (block_count(a, b, [&](std::int64_t j) { return order[j] <= mid; }) >= keep - a)
      hi = mid;
    else
      lo = mid + 1;
  }
  cut.run = a;
  cut.run_end = b;
  cut.limit = lo;
  return cut;
}

__global__ void apply_top_k(float* work, unsigned char* mask, const int* sorted_idx,
                            const void* top_k, Code top_k_t, int* status, std::int64_t vocab) {
  __shared__ Ordered sh;
  const std::int64_t r = blockIdx.x;
  if (status[r]) return;
  const std::int64_t k = load_k(top_k, r, top_k_t);
  if (!(0 < k && k < vocab)) return;
  keep_and_renormalize(work + r * vocab, mask + r * vocab, sorted_idx + r * vocab, k, vocab,
                       status + r, sh);
}

__global__ void apply_top_p(float* work, unsigned char* mask, const int* sorted_idx,
                            const void* top_p, Code top_p_t, int* status, std::int64_t* onehot,
                            bool unshifted, std::int64_t vocab) {
  __shared__ Ordered sh;
  __shared__ float best_v[kThreads];
  __shared__ std::int64_t best_i[kThreads];
  __shared__ std::int64_t s_keep;
  const std::int64_t r = blockIdx.x;
  if (status[r]) return;
  const float p = device::load_float(top_p, r, top_p_t);
  float* row = work + r * vocab;
  if (p <= 0.0f) {
    // One-hot at the first maximal index (std::max_element).
    float bv = -1.0f;
    std::int64_t bi = -1;
    for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      if (row[i] > bv) bv = row[i], bi = i;  // ascending i per thread: the first of equals stays
    }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s) {
        const float ov = best_v[threadIdx.x + s];
        const std::int64_t oi = best_i[threadIdx.x + s];
        const float mv = best_v[threadIdx.x];
        const std::int64_t mi = best_i[threadIdx.x];
        if (oi >= 0 && (mi < 0 || ov > mv || (ov == mv && oi < mi))) {
          best_v[threadIdx.x] = ov;
          best_i[threadIdx.x] = oi;
        }
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (best_i[0] < 0)
        status[r] = 1;
      else
        onehot[r] = best_i[0];
    }
    return;
  }
  if (!(p < 1.0f)) return;  // p >= 1 keeps everything
  const int* order = sorted_idx + r * vocab;
  TopPVisit visit{p, unshifted};
  visit_in_order(vocab, IndexedGet{row, order}, visit, sh);
  if (threadIdx.x == 0) s_keep = visit.keep;
  __syncthreads();
  const std::int64_t keep = s_keep;
  const RunCut cut = cut_inside_run(row, order, keep, vocab);
  keep_and_renormalize(row, mask + r * vocab, order, keep, vocab, status + r, sh, cut);
}

// The final normalization (as torch.multinomial's), then the draw.
__global__ void finalize(const float* work, const int* status, const std::int64_t* onehot,
                         float* dist, void* samples, Code samples_t, std::uint64_t seed,
                         std::int64_t vocab) {
  __shared__ Ordered sh;
  __shared__ double s_total;
  __shared__ int s_bad;
  const std::int64_t r = blockIdx.x;
  const float* row = work + r * vocab;
  float* d = dist + r * vocab;
  if (threadIdx.x == 0) s_bad = status[r];
  __syncthreads();
  if (!s_bad && onehot[r] >= 0) {
    const std::int64_t hot = onehot[r];
    for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) d[i] = i == hot ? 1.0f : 0.0f;
  } else if (!s_bad) {
    SumVisit total;
    visit_in_order(vocab, RowGet{row}, total, sh);
    if (threadIdx.x == 0) {
      s_total = total.sum;
      if (!(total.sum > 0.0)) s_bad = 1;
    }
    __syncthreads();
    if (!s_bad) {
      const double t = s_total;
      row_pass<float>(
          vocab, [&](std::int64_t i) { return row[i]; },
          [&](std::int64_t i, float x) {
            d[i] = static_cast<float>(__ddiv_rn(static_cast<double>(x), t));
          });
    }
  }
  __syncthreads();
  if (s_bad) {
    for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x)
      d[i] = __int_as_float(0x7fc00000);
    if (samples && threadIdx.x == 0) device::store_index(samples, r, samples_t, -1);
    return;
  }
  if (!samples) return;
  // The CPU's draw: the total of the distribution, then the inverse CDF over positive entries.
  SumVisit total;
  visit_in_order(vocab, RowGet{d}, total, sh);
  if (threadIdx.x == 0) s_total = total.sum;
  __syncthreads();
  const std::uint64_t bits = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(r)));
  const double u = static_cast<double>(bits >> 11) * 0x1p-53;
  DrawVisit draw{u * s_total};
  visit_in_order(vocab, RowGet{d}, draw, sh);
  if (threadIdx.x == 0) device::store_index(samples, r, samples_t, draw.last);
}

struct Inputs {
  const DeviceTensor* probs = nullptr;
  const DeviceTensor* top_k = nullptr;
  const DeviceTensor* top_p = nullptr;
};

bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
}

Inputs inputs_of(const Definition& def, const DeviceArguments& args) {
  Inputs in;
  in.probs = &args.tensor("probs");
  if (args.tensors.count("top_k")) in.top_k = &args.tensor("top_k");
  if (args.tensors.count("top_p")) in.top_p = &args.tensor("top_p");
  if (in.probs->rank() != 2) throw Error(def.name, "probs must be [batch_size, vocab_size]");
  if (!is_float(in.probs->dtype()))
    throw Error(def.name, cat("probs is ", dtype_name(in.probs->dtype()), ", not a float dtype"));
  for (const DeviceTensor* t : {in.top_k, in.top_p}) {
    if (t && (t->rank() != 1 || t->dim(0) != in.probs->dim(0))) {
      throw Error(def.name, cat("top_k/top_p have shape ", shape_to_string(t->shape()),
                                ", probs has ", in.probs->dim(0), " rows"));
    }
  }
  if (in.top_p && !is_float(in.top_p->dtype()))
    throw Error(def.name, cat("top_p is ", dtype_name(in.top_p->dtype()), ", not a float dtype"));
  if (in.top_k && in.top_k->dtype() == DType::kFloat4E2M1)
    throw Error(def.name, "top_k cannot be float4");
  return in;
}

// Sorts every row of `work` by (value descending, index ascending): sorted keys and indices.
void sort_rows(const float* work, std::int64_t batch, std::int64_t vocab, std::uint64_t* keys,
               int* idx, std::uint64_t* sorted_keys, int* sorted_idx, cudaStream_t stream) {
  const std::int64_t n = batch * vocab;
  make_keys<<<grid_for(n), 256, 0, stream>>>(work, keys, idx, batch, vocab);
  FIB_CUDA_CHECK_LAUNCH();
  int row_bits = 0;
  while ((std::int64_t{1} << row_bits) < batch) ++row_bits;
  std::size_t temp_bytes = 0;
  FIB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, sorted_keys, idx,
                                                 sorted_idx, n, 0, 32 + row_bits, stream));
  Scratch temp(temp_bytes, stream);
  FIB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.as<void>(), temp_bytes, keys, sorted_keys,
                                                 idx, sorted_idx, n, 0, 32 + row_bits, stream));
}

// Enqueues the whole pipeline: the distribution into `dist` [batch, vocab] and, when `samples`
// is given, one draw per row.
void enqueue(const Definition& def, const DeviceArguments& args, cudaStream_t stream, float* dist,
             void* samples, Code samples_t, std::uint64_t seed) {
  const Inputs in = inputs_of(def, args);
  const std::int64_t batch = in.probs->dim(0), vocab = in.probs->dim(1);
  if (batch == 0) return;
  if (vocab > INT32_MAX || batch > INT32_MAX)
    throw Error(def.name, cat(batch, " rows of ", vocab, " tokens is too large"));
  const std::int64_t n = batch * vocab;
  Scratch work(static_cast<std::size_t>(n) * sizeof(float), stream);
  Scratch status(static_cast<std::size_t>(batch) * sizeof(int), stream);
  Scratch onehot(static_cast<std::size_t>(batch) * sizeof(std::int64_t), stream);
  FIB_CUDA_CHECK(
      cudaMemsetAsync(status.as<void>(), 0, static_cast<std::size_t>(batch) * sizeof(int), stream));
  FIB_CUDA_CHECK(cudaMemsetAsync(onehot.as<void>(), 0xff,
                                 static_cast<std::size_t>(batch) * sizeof(std::int64_t), stream));
  load_rows<<<grid_for(n), 256, 0, stream>>>(in.probs->raw(), device::code(in.probs->dtype()),
                                             work.as<float>(), status.as<int>(), batch, vocab);
  FIB_CUDA_CHECK_LAUNCH();
  const auto rows = static_cast<unsigned>(batch);
  if (in.top_k || in.top_p) {
    const auto bytes = static_cast<std::size_t>(n);
    Scratch keys(bytes * sizeof(std::uint64_t), stream),
        sorted_keys(bytes * sizeof(std::uint64_t), stream);
    Scratch idx(bytes * sizeof(int), stream), sorted_idx(bytes * sizeof(int), stream);
    Scratch mask(bytes, stream);
    FIB_CUDA_CHECK(cudaMemsetAsync(mask.as<void>(), 0, bytes, stream));
    if (in.top_k) {
      sort_rows(work.as<float>(), batch, vocab, keys.as<std::uint64_t>(), idx.as<int>(),
                sorted_keys.as<std::uint64_t>(), sorted_idx.as<int>(), stream);
      apply_top_k<<<rows, kThreads, 0, stream>>>(
          work.as<float>(), mask.as<unsigned char>(), sorted_idx.as<int>(), in.top_k->raw(),
          device::code(in.top_k->dtype()), status.as<int>(), vocab);
      FIB_CUDA_CHECK_LAUNCH();
    }
    if (in.top_p) {
      // After top_k, the order sorted for it serves top_p too (cut_inside_run says why).
      if (!in.top_k) {
        sort_rows(work.as<float>(), batch, vocab, keys.as<std::uint64_t>(), idx.as<int>(),
                  sorted_keys.as<std::uint64_t>(), sorted_idx.as<int>(), stream);
      }
      const bool unshifted = vocab == 1 && in.top_k != nullptr;
      apply_top_p<<<rows, kThreads, 0, stream>>>(work.as<float>(), mask.as<unsigned char>(),
                                                 sorted_idx.as<int>(), in.top_p->raw(),
                                                 device::code(in.top_p->dtype()), status.as<int>(),
                                                 onehot.as<std::int64_t>(), unshifted, vocab);
      FIB_CUDA_CHECK_LAUNCH();
    }
  }
  finalize<<<rows, kThreads, 0, stream>>>(work.as<float>(), status.as<int>(),
                                          onehot.as<std::int64_t>(), dist, samples, samples_t, seed,
                                          vocab);
  FIB_CUDA_CHECK_LAUNCH();
}

class Sampling final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:sampling"; }
  bool supports(const Definition& def, std::string* why) const override {
    if (!cpu_supports("sampling", def, why)) return false;
    if (def.input("min_p")) {
      *why = "min_p sampling has no CUDA kernel (the CPU reference runs it)";
      return false;
    }
    return true;
  }

  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    DeviceTensor samples = make_output(ctx, "samples");
    if (samples.dtype() != DType::kInt64 && samples.dtype() != DType::kInt32) {
      throw Error(ctx.definition.name, cat("samples is ", dtype_name(samples.dtype()),
                                           "; the CUDA sampler writes int64 or int32"));
    }
    const DeviceTensor& probs = args.tensor("probs");
    if (probs.rank() != 2)
      throw Error(ctx.definition.name, "probs must be [batch_size, vocab_size]");
    Scratch dist(static_cast<std::size_t>(probs.numel()) * sizeof(float), ctx.stream);
    enqueue(ctx.definition, args, ctx.stream, dist.as<float>(), samples.raw(),
            device::code(samples.dtype()), ctx.seed);
    DeviceOutputs o;
    o.emplace("samples", std::move(samples));
    return o;
  }
};

}  // namespace

// top_k, top_p, top_k_top_p.
void add_sampling(KernelList& list) { list.push_back(std::make_unique<Sampling>()); }

}  // namespace detail

DeviceTensor sampling_distribution(const Definition& def, const AxisValues& var_axes,
                                   const DeviceArguments& args, cudaStream_t stream) {
  std::string why;
  if (!detail::cpu_supports("sampling", def, &why)) {
    throw Error(def.name, why.empty() ? "not a sampling definition (probs, top_k and/or top_p -> "
                                        "samples)"
                                      : why);
  }
  const auto bound = def.bind_axes(var_axes);
  if (!bound) throw Error(def.name, "a var axis has no value");
  const DeviceTensor& probs = args.tensor("probs");
  if (const TensorSpec* spec = def.input("probs")) {
    const auto want = def.concrete_shape(*spec, *bound);
    if (want && *want != probs.shape()) {
      throw Error(def.name, detail::cat("probs has shape ", shape_to_string(probs.shape()),
                                        ", the axes give ", shape_to_string(*want)));
    }
  }
  if (probs.rank() != 2) throw Error(def.name, "probs must be [batch_size, vocab_size]");
  DeviceTensor dist(DType::kFloat32, probs.shape());
  detail::enqueue(def, args, stream, dist.data<float>(), nullptr, 0, 0);
  return dist;
}

}  // namespace fib::reference_cuda
