// Timing input sets made on the device (GPU lanes). Only the checked sets travel from the
// orchestrator, in the input-set file; each worker makes the pool of timing sets from them on its
// GPU, so that an output cache keyed on the inputs still never hits, without hundreds of MiB of
// random inputs made on the host and copied per workload. A pool set's floating-point tensors
// are its source set's with axis 0 and the last axis each rearranged by an affine bijection: the
// same values (distribution, ranges, per-row sums and top-k) in another order. Integer and
// boolean tensors (indices, lengths, masks: the structure constraints hold for) are copied. The
// weights the checked sets share (shared_fills) are taken as they are: one buffer for every set.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "fib/reference/reference.h"
#include "fib/tensor/tensor.h"

namespace fib::bench::detail {

// The device kernel (gpu_checks.cu) applies the same operator as the host.
#if defined(__CUDACC__)
#define FIB_HOST_DEVICE __host__ __device__
#else
#define FIB_HOST_DEVICE
#endif

// i -> (a * i + b) mod n, with a coprime to n: a bijection of [0, n).
struct AffinePermutation {
  unsigned long long n = 1, a = 1, b = 0;
  FIB_HOST_DEVICE unsigned long long operator()(unsigned long long i) const {
    return (a * i + b) % n;
  }
  bool identity() const { return n <= 1 || (a == 1 && b == 0); }
};

// How one tensor of a pool set is made from its source: element [r][m][c] of the tensor seen as
// [rows.n, middle, cols.n] units of `unit` bytes is the source's [rows(r)][m][cols(c)].
struct PoolPermutation {
  bool permuted = false;  // false: copied as it is
  AffinePermutation rows;
  unsigned long long middle = 1;
  AffinePermutation cols;
  int unit = 1;  // bytes per unit: the element size (a byte, two elements, for float4)
};

// A seeded affine bijection of [0, n) (a drawn coprime to n, b drawn in [0, n)).
AffinePermutation random_affine(unsigned long long n, std::uint64_t seed);

// The rearrangement of a tensor of this dtype and shape in pool set `set` (its index in the
// schedule) as input `input` (its position in the set), from the pool's seed. Never the
// identity for a floating-point tensor of two or more units.
PoolPermutation pool_permutation(DType dtype, const Shape& shape, std::uint64_t pool_seed, int set,
                                 int input);

// The same rearrangement on the host (what the device kernel does; the tests compare the two).
// `src` and `dst` hold rows.n * middle * cols.n units of p.unit bytes.
void permute_on_host(const void* src, void* dst, const PoolPermutation& p);

// The tensors of pool set `set` as a worker makes them on its device, made on the host from its
// source set's tensors (by name: the order the worker uploads them in, which numbers them). The
// `shared` inputs (the weights the checked sets share, shared_fills) are taken as they are: the
// device holds them once, for every set, and the pool's activations are what differ.
std::map<std::string, Tensor, std::less<>> pool_tensors_on_host(
    const std::map<std::string, Tensor, std::less<>>& source, std::uint64_t pool_seed, int set,
    const std::set<std::string, std::less<>>& shared);

// Input set `set` of a workload, on the host: read from the input-set file where it is one of the
// file's `pool_first` sets (0: every set is in the file), else the device-made pool set (made
// from file set (set - pool_first) % pool_first, the worker's cycle). A checked call may be drawn
// on any set, and the judge's tie scoring, the reference's sampling extras and the PyTorch
// reference need its inputs on the host.
reference::Arguments input_set_on_host(const std::filesystem::path& inputs_file, int set,
                                       int pool_first, std::uint64_t pool_seed);

}  // namespace fib::bench::detail
