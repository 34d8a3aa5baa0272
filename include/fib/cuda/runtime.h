// The CUDA runtime as fib uses it: errors that become fib::Error (with the call and the place),
// the devices present, streams, and device tensors (DeviceTensor: a Tensor's dtype and shape
// over device memory). Only built with the CUDA path (FIB_HAVE_CUDA); code that must also
// build without it includes this header under #ifdef FIB_HAVE_CUDA.
//
// A "sticky" CUDA error (an illegal address, a trap, a launch failure) leaves the process's
// CUDA context unusable; StickyError marks those so a worker can say so and be replaced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fib/base/diagnostics.h"
#include "fib/tensor/tensor.h"

// The runtime's own handle types, declared as cuda_runtime_api.h declares them, so this header
// needs no CUDA include path.
struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;

namespace fib::cuda {

// A failed CUDA call: the call's text, the runtime's error name and string, file and line.
class CudaError : public fib::Error {
 public:
  CudaError(int code, std::string message);
  int code() const { return code_; }

 private:
  int code_;
};
// A CUDA error after which the context cannot be used again (see the header comment).
class StickyError : public CudaError {
 public:
  using CudaError::CudaError;
};

// Throws CudaError (StickyError for sticky codes) when `code` is not cudaSuccess.
void check(int code, const char* call, const char* file, int line);
// Whether a cudaError_t code leaves the context unusable.
bool is_sticky(int code);

#define FIB_CUDA_CHECK(call) ::fib::cuda::check(static_cast<int>(call), #call, __FILE__, __LINE__)
// After a kernel launch: the launch's own error (bad configuration), without synchronizing.
#define FIB_CUDA_CHECK_LAUNCH() ::fib::cuda::check_last_launch(__FILE__, __LINE__)
void check_last_launch(const char* file, int line);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t persisting_l2_max_bytes = 0;
  std::int64_t global_memory_bytes = 0;
  std::int64_t shared_memory_per_block_optin = 0;
  int sm_clock_khz = 0;      // maximum SM clock
  int memory_clock_khz = 0;  // peak memory clock
  int memory_bus_bits = 0;
  std::string pci_bus_id;  // "0000:19:00.0"
  int driver_version = 0;  // e.g. 13000
  int runtime_version = 0;
  // Peak DRAM bandwidth from the memory clock and bus width (bytes/s; DDR: two transfers a
  // clock). 0 when the attributes are not reported.
  double peak_dram_bytes_per_second() const;
  std::string arch() const;  // "sm_90"
};

// The number of visible devices; 0 (with *why set) when there is no driver or no device.
int device_count(std::string* why = nullptr);
// Whether a device is usable; *why says why not ("CUDA driver version is insufficient...").
bool available(std::string* why = nullptr);
DeviceInfo device_info(int ordinal);
// Makes `ordinal` the current device of this thread.
void set_device(int ordinal);

// A non-blocking stream owned by this object.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// From now on, device memory freed by DeviceBuffer is kept for the next allocation of the same
// size on the same device instead of going back to the driver (cudaMalloc and cudaFree can
// synchronize the device, which must not happen inside a timed call or behind the timer's
// blocking kernel). Safe when the users of a size share one stream (the worker's case): reuse
// is then ordered after the previous user's work. For worker processes; never turned off.
void enable_allocation_cache();
// Returns every cached buffer to the driver (also done once before an allocation fails).
void release_allocation_cache();

// Device memory (cudaMalloc), freed when the last owner goes.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A dense, row-major tensor in device memory. Copies share the buffer.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  // Uninitialized device storage for `shape` of `dtype` (a zero-element tensor gets a 1-byte
  // buffer, so it is defined and has a valid pointer).
  DeviceTensor(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return nbytes_; }
  bool defined() const { return buffer_ != nullptr; }
  void* raw() const { return buffer_ ? buffer_->data() : nullptr; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  std::int64_t numel_ = 0;
  std::size_t nbytes_ = 0;
  std::shared_ptr<DeviceBuffer> buffer_;
};

// Copies (on `stream`, then waits for it): host -> device and device -> host.
DeviceTensor to_device(const Tensor& host, cudaStream_t stream);
Tensor to_host(const DeviceTensor& device, cudaStream_t stream);
// Fills every byte of `t` with `byte` on `stream` (asynchronous).
void fill_bytes(const DeviceTensor& t, unsigned char byte, cudaStream_t stream);

}  // namespace fib::cuda
