// The device pool's kernel (GPU machine only; skipped visibly elsewhere): every dtype width and
// shape class the pool permutes comes out of the device exactly as the host rearrangement
// (device_pool.h) says.
#ifdef FIB_HAVE_CUDA

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "bench/worker/gpu_checks.h"
#include "fib/bench/inputs/device_pool.h"
#include "support/gpu.h"

namespace fib::bench::detail {
namespace {

namespace cu = fib::cuda;

TEST(GpuDevicePool, PermuteMatchesTheHost) {
  FIB_REQUIRE_GPU();
  cu::set_device(0);
  const cu::Stream stream;
  struct Case {
    DType dtype;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {DType::kBFloat16, {7, 2048}},  {DType::kFloat32, {33, 4, 65}},
      {DType::kFloat16, {2048}},      {DType::kFloat8E4M3FN, {129, 128}},
      {DType::kFloat4E2M1, {16, 64}}, {DType::kFloat4E2M1, {3, 5}},
      {DType::kFloat32, {1, 100003}}, {DType::kBFloat16, {4096, 1}},
  };
  std::mt19937_64 rng(5);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const PoolPermutation p = pool_permutation(c.dtype, c.shape, 1234, 3 + static_cast<int>(k), 0);
    ASSERT_TRUE(p.permuted) << k;
    Tensor host(c.dtype, c.shape);
    auto* bytes = static_cast<unsigned char*>(host.raw());
    for (std::size_t b = 0; b < host.nbytes(); ++b) bytes[b] = static_cast<unsigned char>(rng());
    const cu::DeviceTensor src = cu::to_device(host, stream.get());
    const cu::DeviceTensor dst(c.dtype, c.shape);
    gpu::launch_permute(src.raw(), dst.raw(), p.rows, p.middle, p.cols, p.unit, stream.get());
    const Tensor got = cu::to_host(dst, stream.get());
    Tensor want(c.dtype, c.shape);
    permute_on_host(host.raw(), want.raw(), p);
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0)
        << "case " << k << " (" << dtype_name(c.dtype) << ")";
    EXPECT_NE(std::memcmp(got.raw(), host.raw(), host.nbytes()), 0) << "case " << k;
  }
}

}  // namespace
}  // namespace fib::bench::detail

#endif  // FIB_HAVE_CUDA
