#include "fib/bench/inputs/device_pool.h"

#include <fmt/format.h>

#include <cstring>
#include <numeric>

#include "fib/bench/inputs/input_set_file.h"
#include "fib/tensor/random.h"

namespace fib::bench::detail {

AffinePermutation random_affine(unsigned long long n, std::uint64_t seed) {
  AffinePermutation p;
  p.n = n == 0 ? 1 : n;
  if (p.n == 1) return p;
  Rng rng(seed);
  p.b = rng.next() % p.n;
  // a * i must not overflow 64 bits: past 2^32 units (never seen in a corpus tensor's axis), a
  // rotation only.
  if (p.n >= (1ull << 32)) return p;
  // Coprimes are dense (at least ~1/log log n of [1, n)), so a few draws find one.
  do {
    p.a = 1 + rng.next() % (p.n - 1);
  } while (std::gcd(p.a, p.n) != 1);
  return p;
}

PoolPermutation pool_permutation(DType dtype, const Shape& shape, std::uint64_t pool_seed, int set,
                                 int input) {
  PoolPermutation p;
  if (!dtype_is_float(dtype)) return p;
  const auto numel = static_cast<std::uint64_t>(shape_numel(shape));
  const bool packed = dtype_bits(dtype) < 8;
  p.unit = packed ? 1 : dtype_bits(dtype) / 8;
  unsigned long long rows = 1, middle = 1, cols = 1;
  if (shape.size() >= 2 && !(packed && shape.back() % 2 != 0)) {
    rows = static_cast<unsigned long long>(shape.front());
    cols = static_cast<unsigned long long>(shape.back());
    if (packed) cols /= 2;
    for (std::size_t k = 1; k + 1 < shape.size(); ++k) {
      middle *= static_cast<unsigned long long>(shape[k]);
    }
  } else {
    // One axis (or packed pairs that straddle rows): the tensor as one row of units.
    cols = packed ? (numel + 1) / 2 : numel;
  }
  if (rows * middle * cols <= 1 || rows * cols <= 1) return p;
  // A stream per (pool, set, input, axis), derived like every other seed of a run.
  p.permuted = true;
  p.middle = middle;
  p.rows = random_affine(rows, Rng::derive(pool_seed, fmt::format("{}/{}/rows", set, input)));
  p.cols = random_affine(cols, Rng::derive(pool_seed, fmt::format("{}/{}/cols", set, input)));
  if (p.rows.identity() && p.cols.identity()) {
    // Both draws fell on the identity: shift the longer axis by one.
    (rows >= cols ? p.rows : p.cols).b = 1;
  }
  return p;
}

void permute_on_host(const void* src, void* dst, const PoolPermutation& p) {
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  const auto unit = static_cast<std::size_t>(p.unit);
  for (unsigned long long r = 0; r < p.rows.n; ++r) {
    for (unsigned long long m = 0; m < p.middle; ++m) {
      for (unsigned long long c = 0; c < p.cols.n; ++c) {
        const unsigned long long to = (r * p.middle + m) * p.cols.n + c;
        const unsigned long long from = (p.rows(r) * p.middle + m) * p.cols.n + p.cols(c);
        std::memcpy(d + to * unit, s + from * unit, unit);
      }
    }
  }
}

std::map<std::string, Tensor, std::less<>> pool_tensors_on_host(
    const std::map<std::string, Tensor, std::less<>>& source, std::uint64_t pool_seed, int set,
    const std::set<std::string, std::less<>>& shared) {
  std::map<std::string, Tensor, std::less<>> made;
  int input = 0;
  for (const auto& [name, src] : source) {
    const PoolPermutation how = pool_permutation(src.dtype(), src.shape(), pool_seed, set, input++);
    if (!how.permuted || shared.contains(name)) {
      made.emplace(name, src);
      continue;
    }
    Tensor dst(src.dtype(), src.shape());
    permute_on_host(src.raw(), dst.raw(), how);
    made.emplace(name, std::move(dst));
  }
  return made;
}

reference::Arguments input_set_on_host(const std::filesystem::path& inputs_file, int set,
                                       int pool_first, std::uint64_t pool_seed) {
  if (set < pool_first || pool_first <= 0) return read_input_set(inputs_file, set);
  reference::Arguments args = read_input_set(inputs_file, (set - pool_first) % pool_first);
  args.tensors = pool_tensors_on_host(args.tensors, pool_seed, set, shared_fills(inputs_file));
  return args;
}

}  // namespace fib::bench::detail
