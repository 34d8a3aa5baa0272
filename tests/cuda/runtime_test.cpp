// fib::cuda runtime helpers: errors, devices, device tensors. The error tests run everywhere;
// the device ones skip visibly without a GPU.
#include "fib/cuda/runtime.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "support/gpu.h"

namespace fib::cuda {
namespace {

TEST(CudaRuntime, AFailedCallNamesTheErrorTheCallAndThePlace) {
  try {
    check(static_cast<int>(cudaErrorInvalidValue), "cudaMemcpy(a, b, n, kind)", "/x/y/file.cu", 42);
    FAIL() << "no exception";
  } catch (const StickyError&) {
    FAIL() << "invalid value is not sticky";
  } catch (const CudaError& e) {
    EXPECT_EQ(e.code(), static_cast<int>(cudaErrorInvalidValue));
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaMemcpy(a, b, n, kind) at file.cu:42"), std::string::npos) << what;
  }
}

TEST(CudaRuntime, AnIllegalAddressIsSticky) {
  EXPECT_TRUE(is_sticky(cudaErrorIllegalAddress));
  EXPECT_TRUE(is_sticky(cudaErrorLaunchFailure));
  EXPECT_FALSE(is_sticky(cudaErrorMemoryAllocation));
  EXPECT_FALSE(is_sticky(cudaErrorInvalidConfiguration));
  EXPECT_THROW(check(static_cast<int>(cudaErrorIllegalAddress), "k<<<1,1>>>", "k.cu", 1),
               StickyError);
  EXPECT_NO_THROW(check(static_cast<int>(cudaSuccess), "ok", "k.cu", 1));
}

TEST(CudaRuntime, NoDeviceIsReportedWithAReason) {
  std::string why;
  int n = device_count(&why);
  if (n > 0) GTEST_SKIP() << n << " device(s) present: this test is for machines without one";
  EXPECT_FALSE(available());
  EXPECT_FALSE(why.empty());
}

TEST(CudaRuntime, DeviceInfoDescribesTheGpu) {
  FIB_REQUIRE_GPU();
  DeviceInfo info = device_info(0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.major, 3);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_GT(info.peak_dram_bytes_per_second(), 1e11);
  EXPECT_EQ(info.arch(), "sm_" + std::to_string(info.major) + std::to_string(info.minor));
}

TEST(CudaRuntime, TensorsRoundTripThroughTheDevice) {
  FIB_REQUIRE_GPU();
  Stream s;
  Tensor h(DType::kBFloat16, {3, 5});
  for (std::int64_t i = 0; i < h.numel(); ++i) h.set(i, 0.25 * static_cast<double>(i) - 1.0);
  DeviceTensor d = to_device(h, s.get());
  EXPECT_EQ(d.shape(), h.shape());
  EXPECT_EQ(d.nbytes(), h.nbytes());
  Tensor back = to_host(d, s.get());
  EXPECT_TRUE(back.same_bytes(h));
  fill_bytes(d, 0xAB, s.get());
  Tensor filled = to_host(d, s.get());
  EXPECT_EQ(filled.data<std::uint16_t>()[7], 0xABAB);
}

TEST(CudaRuntime, EmptyTensorsHaveStorage) {
  FIB_REQUIRE_GPU();
  DeviceTensor d(DType::kFloat32, {0, 4});
  EXPECT_TRUE(d.defined());
  EXPECT_EQ(d.nbytes(), 0u);
  EXPECT_NE(d.raw(), nullptr);
}

}  // namespace
}  // namespace fib::cuda
