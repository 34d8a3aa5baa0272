#include "fib/base/device.h"

#include <gtest/gtest.h>

namespace fib {
namespace {

TEST(BaseDevice, ParsesCpuAndCuda) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_EQ(parse_device("cuda"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:0"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:12"), Device::cuda(12));
  EXPECT_TRUE(parse_device("cpu")->is_cpu());
  EXPECT_TRUE(parse_device("cuda:3")->is_cuda());
}

TEST(BaseDevice, RefusesWhatNamesNoDevice) {
  for (const char* text :
       {"", "gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda 0", "cuda:all", "cpu:0"}) {
    EXPECT_EQ(parse_device(text), std::nullopt) << text;
  }
}

TEST(BaseDevice, FormatsAsTracesWriteIt) {
  EXPECT_EQ(Device::cpu().to_string(), "cpu");
  EXPECT_EQ(Device::cuda(0).to_string(), "cuda:0");
  EXPECT_EQ(Device::cuda(7).to_string(), "cuda:7");
  for (const char* text : {"cpu", "cuda:0", "cuda:15"}) {
    EXPECT_EQ(parse_device(text)->to_string(), text);
  }
}

}  // namespace
}  // namespace fib
