// GPU tests skip visibly, with the reason, where no CUDA device can be used (CI has the toolkit
// but no GPU). FIB_REQUIRE_GPU() at the top of a test.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fib/cuda/runtime.h"

#define FIB_REQUIRE_GPU()                                            \
  do {                                                               \
    std::string fib_gpu_why;                                         \
    if (!::fib::cuda::available(&fib_gpu_why))                       \
      GTEST_SKIP() << "needs a CUDA device (" << fib_gpu_why << ")"; \
  } while (0)
