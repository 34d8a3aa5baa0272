// Bulk fills on the host: blocks of elements made by the counter-based generator, then
// converted to the tensor's dtype in place, over as many threads as the machine has. This file
// is compiled with -ffp-contract=off (CMakeLists.txt): the float operations of
// counter_random.h must stay separate, as they are on the device. (Its -fno-math-errno and
// -fno-trapping-math change no value; they let the loops of sqrt and clamps vectorize.)
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "fib/tensor/inputs.h"
#include "fib/tensor/numeric.h"

namespace fib {

namespace {

namespace cr = counter_random;

constexpr std::int64_t kBlock = 1024;  // elements per block: a multiple of 4
constexpr std::int64_t kGroups = kBlock / 4;

// Writes count floats as elements first .. first+count-1 of a tensor of dtype d (first is a
// multiple of 4, so float4 pairs start at a byte).
[[gnu::always_inline]] inline void store_floats(const float* v, std::int64_t count, DType d,
                                                void* base, std::int64_t first) {
  auto* bytes = static_cast<unsigned char*>(base);
  switch (d) {
    case DType::kFloat32:
      std::memcpy(bytes + first * 4, v, static_cast<std::size_t>(count) * 4);
      return;
    case DType::kBFloat16: {
      auto* o = reinterpret_cast<std::uint16_t*>(bytes) + first;
      for (std::int64_t i = 0; i < count; ++i) o[i] = numeric::float_to_bf16(v[i]);
      return;
    }
    case DType::kFloat16: {
      auto* o = reinterpret_cast<std::uint16_t*>(bytes) + first;
      for (std::int64_t i = 0; i < count; ++i) o[i] = numeric::float_to_fp16(v[i]);
      return;
    }
    case DType::kFloat8E4M3FN: {
      unsigned char* o = bytes + first;
      for (std::int64_t i = 0; i < count; ++i) o[i] = numeric::float_to_fp8_e4m3fn(v[i]);
      return;
    }
    case DType::kFloat8E5M2: {
      unsigned char* o = bytes + first;
      for (std::int64_t i = 0; i < count; ++i) o[i] = numeric::float_to_fp8_e5m2(v[i]);
      return;
    }
    case DType::kFloat4E2M1: {
      unsigned char* o = bytes + first / 2;
      for (std::int64_t j = 0; j < count / 2; ++j) {
        o[j] = static_cast<unsigned char>(numeric::float_to_fp4_e2m1(v[2 * j]) |
                                          (numeric::float_to_fp4_e2m1(v[2 * j + 1]) << 4));
      }
      if (count % 2) o[count / 2] = numeric::float_to_fp4_e2m1(v[count - 1]);
      return;
    }
    default:
      throw Error("bulk fill", fmt::format("{} is not a float dtype", dtype_name(d)));
  }
}

template <typename T>
void store_as(const std::int64_t* v, std::int64_t count, void* base, std::int64_t first) {
  T* o = static_cast<T*>(base) + first;
  for (std::int64_t i = 0; i < count; ++i) o[i] = static_cast<T>(v[i]);
}

[[gnu::always_inline]] inline void store_ints(const std::int64_t* v, std::int64_t count, DType d,
                                              void* base, std::int64_t first) {
  switch (d) {
    case DType::kInt64:
      return store_as<std::int64_t>(v, count, base, first);
    case DType::kInt32:
      return store_as<std::int32_t>(v, count, base, first);
    case DType::kInt16:
      return store_as<std::int16_t>(v, count, base, first);
    case DType::kInt8:
      return store_as<std::int8_t>(v, count, base, first);
    case DType::kUInt8:
    case DType::kBool:
      return store_as<std::uint8_t>(v, count, base, first);
    default:
      throw Error("bulk fill", fmt::format("{} is not an integer dtype", dtype_name(d)));
  }
}

// The words of groups g0 .. g0 + kGroups - 1, element by element: the 10 rounds run over all
// groups of the block at once (lanes of the vector unit) instead of group by group.
[[gnu::always_inline]] inline void block_words(std::uint64_t key, std::uint64_t g0,
                                               std::uint32_t* w) {
  std::uint32_t c0[kGroups], c1[kGroups], c2[kGroups], c3[kGroups];
  for (std::int64_t i = 0; i < kGroups; ++i) {
    const std::uint64_t g = g0 + static_cast<std::uint64_t>(i);
    c0[i] = static_cast<std::uint32_t>(g);
    c1[i] = static_cast<std::uint32_t>(g >> 32);
    c2[i] = c3[i] = 0;
  }
  auto k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    for (std::int64_t i = 0; i < kGroups; ++i) cr::philox_round(c0[i], c1[i], c2[i], c3[i], k0, k1);
    k0 += cr::kPhiloxW0;
    k1 += cr::kPhiloxW1;
  }
  for (std::int64_t i = 0; i < kGroups; ++i) {
    w[4 * i] = c0[i];
    w[4 * i + 1] = c1[i];
    w[4 * i + 2] = c2[i];
    w[4 * i + 3] = c3[i];
  }
}

// Elements [begin, end) of the fill (begin a multiple of 4), block by block; the same values as
// cr::float_group and cr::integer_group give element by element (the device's way). Built for
// AVX2 as well, chosen at run time where the CPU has it: the float operations are the same
// IEEE operations in wider registers, so the bits do not change.
__attribute__((target_clones("avx2", "default"))) void fill_range(const BulkFill& f, void* dst,
                                                                  std::int64_t begin,
                                                                  std::int64_t end) {
  const cr::FillSpec& spec = f.spec;
  const float width = cr::detail::sub(spec.b, spec.a);
  std::uint32_t w[kBlock];
  float fv[kBlock];
  std::int64_t iv[kBlock];
  for (std::int64_t b = begin; b < end; b += kBlock) {
    const std::int64_t len = std::min(kBlock, end - b);
    block_words(f.key, static_cast<std::uint64_t>(b / 4), w);
    switch (spec.dist) {
      case cr::Dist::kNormal:
        for (std::int64_t k = 0; k < kBlock / 2; ++k)
          cr::normal_pair(w[2 * k], w[2 * k + 1], fv[2 * k], fv[2 * k + 1]);
        for (std::int64_t i = 0; i < kBlock; ++i) fv[i] = cr::normal_value(spec, fv[i]);
        store_floats(fv, len, f.dtype, dst, b);
        break;
      case cr::Dist::kUniform:
        for (std::int64_t i = 0; i < kBlock; ++i) fv[i] = cr::uniform_value(spec, width, w[i]);
        store_floats(fv, len, f.dtype, dst, b);
        break;
      case cr::Dist::kInteger:
        for (std::int64_t i = 0; i < kBlock; ++i) iv[i] = cr::integer_value(spec, w[i]);
        store_ints(iv, len, f.dtype, dst, b);
        break;
    }
  }
}

}  // namespace

void check_bulk_fill(const BulkFill& fill) {
  const bool integers = fill.spec.dist == cr::Dist::kInteger;
  if (integers == dtype_is_float(fill.dtype)) {
    throw Error("bulk fill", fmt::format("cannot fill {} from a {} distribution",
                                         dtype_name(fill.dtype), integers ? "integer" : "float"));
  }
}

Tensor make_bulk_fill(const BulkFill& fill) {
  check_bulk_fill(fill);
  Tensor t(fill.dtype, fill.shape);
  const std::int64_t n = t.numel();
  // Whole blocks per thread; small fills stay on the calling thread.
  constexpr std::int64_t kPerThreadMin = std::int64_t{1} << 18;
  const std::int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t threads = std::clamp<std::int64_t>(n / kPerThreadMin, 1, hw);
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<std::thread> pool;
  for (std::int64_t k = 0; k < threads; ++k) {
    const std::int64_t begin = std::min(n, blocks * k / threads * kBlock);
    const std::int64_t end = std::min(n, blocks * (k + 1) / threads * kBlock);
    if (k + 1 == threads) {
      fill_range(fill, t.raw(), begin, end);
    } else {
      pool.emplace_back(fill_range, std::cref(fill), t.raw(), begin, end);
    }
  }
  for (auto& th : pool) th.join();
  return t;
}

}  // namespace fib
