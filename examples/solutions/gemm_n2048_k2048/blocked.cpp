// blocked: GEMM of gemm_n2048_k2048 (Llama 3.2 1B attn.o_proj), blocked and multithreaded.
//
// C = A @ B.T (A [M, 2048], B [2048, 2048], float16 in and out, fp32 accumulation, one
// rounding), organised for the CPU:
//  - A is converted to fp32 once per call; each row of B once (not once per row of A), with a
//    branch-free float16 -> fp32 conversion the compiler vectorizes;
//  - B.T needs no transpose: row n of B is contiguous in k, as is row m of A, so every dot
//    product streams two contiguous fp32 rows; B is walked in blocks of 4 rows, each block
//    converted into a small buffer that stays in L1 while all M rows of A use it;
//  - 16 partial sums per dot product (vectorizable at -O2);
//  - the N columns are split over std::threads (one block of columns per hardware thread).
// Destination-passing.
//
// Expected from `fib run`: PASSED on every workload, much faster than `naive`.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <system_error>
#include <thread>
#include <vector>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

namespace {

// Round to nearest even; NaN stays NaN, overflow becomes infinity.
std::uint16_t float_to_fp16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (abs < 0x38800000u) {  // subnormal or zero in fp16: round at the fixed point 2^-24
    float a;
    std::memcpy(&a, &abs, sizeof a);
    const float scaled = a * 16777216.0f;  // exact: a power-of-two scale
    auto q = static_cast<std::uint32_t>(scaled);
    const float rem = scaled - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

constexpr std::int64_t kK = 2048;    // the definition's constant K: fixed trip counts
constexpr std::int64_t kBlockN = 4;  // rows of B converted and kept hot together
constexpr int kLanes = 16;           // partial sums per dot product
constexpr std::int64_t kMinColumnsPerThread = 128;

inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// float16 -> fp32 without branches (normals by rescaling the exponent, subnormals by a magic
// bias; infinities and NaNs come out of the rescaling), so loops over it vectorize.
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
  const std::uint32_t sign = w & 0x80000000u;
  const std::uint32_t two_w = w + w;
  const float normalized = bits_to_float((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = bits_to_float((two_w >> 17) | (126u << 23)) - 0.5f;
  const std::uint32_t subnormal = 0u - static_cast<std::uint32_t>(two_w < (1u << 27));  // mask
  const std::uint32_t magnitude =
      (float_to_bits(denormalized) & subnormal) | (float_to_bits(normalized) & ~subnormal);
  return bits_to_float(sign | magnitude);
}

void convert_row(const std::uint16_t* __restrict in, float* __restrict out) {
  for (std::int64_t k = 0; k < kK; ++k) out[k] = half_to_float(in[k]);
}

float dot(const float* x, const float* y) {
  float acc[kLanes] = {};
  for (std::int64_t k = 0; k < kK; k += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += x[k + j] * y[k + j];
  }
  float sum = 0.0f;
  for (int j = 0; j < kLanes; ++j) sum += acc[j];
  return sum;
}

// One row of A against kBlockN rows of B: each load of A feeds kBlockN products.
void dot_block(const float* x, const float* y, float* out) {
  float acc[kBlockN][kLanes] = {};
  for (std::int64_t k = 0; k < kK; k += kLanes) {
    for (std::int64_t j = 0; j < kBlockN; ++j) {
      for (int l = 0; l < kLanes; ++l) acc[j][l] += x[k + l] * y[j * kK + k + l];
    }
  }
  for (std::int64_t j = 0; j < kBlockN; ++j) {
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += acc[j][l];
    out[j] = sum;
  }
}

struct Problem {
  const float* a;  // [M, K] in fp32
  const std::uint16_t* b;
  std::uint16_t* c;
  std::int64_t m_size, n_size;
};

// Columns [n_begin, n_end) of C.
void columns(const Problem& p, std::int64_t n_begin, std::int64_t n_end) {
  std::vector<float> block(static_cast<std::size_t>(kBlockN * kK));
  for (std::int64_t n0 = n_begin; n0 < n_end; n0 += kBlockN) {
    const std::int64_t nb = std::min(kBlockN, n_end - n0);
    for (std::int64_t j = 0; j < nb; ++j) {
      convert_row(p.b + (n0 + j) * kK, block.data() + j * kK);
    }
    for (std::int64_t m = 0; m < p.m_size; ++m) {
      const float* am = p.a + m * kK;
      float sums[kBlockN];
      if (nb == kBlockN) {
        dot_block(am, block.data(), sums);
      } else {
        for (std::int64_t j = 0; j < nb; ++j) sums[j] = dot(am, block.data() + j * kK);
      }
      for (std::int64_t j = 0; j < nb; ++j) p.c[m * p.n_size + n0 + j] = float_to_fp16(sums[j]);
    }
  }
}

void gemm(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  if (a.size(1) != kK || b.size(1) != kK || !a.is_contiguous() || !b.is_contiguous() ||
      !c.is_contiguous()) {
    TVM_FFI_THROW(ValueError) << "blocked gemm expects contiguous A [M, 2048] and B [N, 2048]";
  }
  Problem p{};
  p.m_size = a.size(0);
  p.n_size = b.size(0);
  p.b = static_cast<const std::uint16_t*>(b.data_ptr());
  p.c = static_cast<std::uint16_t*>(c.data_ptr());
  std::vector<float> a32(static_cast<std::size_t>(p.m_size * kK));
  const auto* pa = static_cast<const std::uint16_t*>(a.data_ptr());
  for (std::int64_t m = 0; m < p.m_size; ++m) convert_row(pa + m * kK, a32.data() + m * kK);
  p.a = a32.data();

  const std::int64_t hw = std::max<std::int64_t>(1, std::thread::hardware_concurrency());
  const std::int64_t threads =
      std::max<std::int64_t>(1, std::min(hw, p.n_size / kMinColumnsPerThread));
  // Blocks of whole kBlockN groups, one per thread.
  std::int64_t chunk = (p.n_size + threads - 1) / threads;
  chunk = (chunk + kBlockN - 1) / kBlockN * kBlockN;
  std::vector<std::thread> pool;
  std::int64_t handed_out = chunk;  // columns [0, chunk) stay on this thread
  try {
    for (; handed_out < p.n_size; handed_out += chunk) {
      pool.emplace_back(columns, std::cref(p), handed_out, std::min(p.n_size, handed_out + chunk));
    }
  } catch (const std::system_error&) {
    // No more threads to be had: this thread does the rest.
  }
  columns(p, 0, std::min(p.n_size, chunk));
  if (handed_out < p.n_size) columns(p, handed_out, p.n_size);
  for (auto& t : pool) t.join();
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, gemm);
