// GPU tests skip visibly, with the reason, where no CUDA device can be used (CI has the toolkit
// but no GPU). FIB_REQUIRE_GPU() at the top of a test.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <string>

#include "fib/cuda/runtime.h"

#define FIB_REQUIRE_GPU()                                            \
  do {                                                               \
    std::string fib_gpu_why;                                         \
    if (!::fib::cuda::available(&fib_gpu_why))                       \
      GTEST_SKIP() << "needs a CUDA device (" << fib_gpu_why << ")"; \
  } while (0)

namespace fib::testing {

// Tests that time GPU work must not share the GPU with each other: ctest runs test processes in
// parallel (-j). Each such test holds this exclusive lock (a file lock, across processes) for its
// duration, so they run one at a time.
class ExclusiveGpu {
 public:
  ExclusiveGpu() {
    fd_ = ::open("/tmp/fib-cuda-timing-tests.lock", O_CREAT | O_RDWR, 0666);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~ExclusiveGpu() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  ExclusiveGpu(const ExclusiveGpu&) = delete;
  ExclusiveGpu& operator=(const ExclusiveGpu&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace fib::testing
