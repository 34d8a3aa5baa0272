// Tensor: a dense, contiguous, row-major host tensor of any FlashInfer-Trace dtype, with cheap
// shared copies and typed access. (Device buffers are added by the GPU work.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fib/trace/dtype.h"

namespace fib {

using Shape = std::vector<std::int64_t>;

// Number of elements of a shape (1 for a 0-D shape); throws fib::Error on a negative
// dimension or overflow.
std::int64_t shape_numel(const Shape& shape);
std::string shape_to_string(const Shape& shape);  // "[2, 3]"

// Storage alignment of every Tensor (a cache line; enough for any SIMD load).
inline constexpr std::size_t kTensorAlignment = 64;

// Whether T is the storage type of `t` (see Tensor::data).
template <typename T>
constexpr bool is_storage_type(DType t) {
  using U = std::remove_cv_t<T>;
  switch (t) {
    case DType::kFloat32:
      return std::is_same_v<U, float>;
    case DType::kFloat16:
    case DType::kBFloat16:
      return std::is_same_v<U, std::uint16_t>;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
    case DType::kFloat4E2M1:
    case DType::kUInt8:
    case DType::kBool:
      return std::is_same_v<U, std::uint8_t>;
    case DType::kInt64:
      return std::is_same_v<U, std::int64_t>;
    case DType::kInt32:
      return std::is_same_v<U, std::int32_t>;
    case DType::kInt16:
      return std::is_same_v<U, std::int16_t>;
    case DType::kInt8:
      return std::is_same_v<U, std::int8_t>;
  }
  return false;
}

class Tensor {
 public:
  // An undefined tensor (no storage).
  Tensor() = default;
  // Allocates zero-filled, kTensorAlignment-aligned storage for `shape` of `dtype`. A tensor
  // with no elements still gets (empty) storage, so it is defined. Throws fib::Error for a bad
  // shape or when the memory cannot be had.
  Tensor(DType dtype, Shape shape);
  // A tensor over memory it does not allocate: `storage` points at the first element and keeps
  // its owner alive (an aliasing shared_ptr, e.g. into a file mapping). The memory must hold
  // the shape's bytes; through a view of read-only memory only reads are allowed (a write
  // faults). Throws fib::Error for a bad shape or a null pointer.
  static Tensor view(DType dtype, Shape shape, std::shared_ptr<std::byte[]> storage);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return nbytes_; }
  bool defined() const { return storage_ != nullptr; }

  // Raw bytes (float4_e2m1: two elements per byte, element 2i in the low nibble; with an odd
  // count the last byte's high nibble is padding, kept zero by every fib writer).
  std::span<std::byte> bytes();
  std::span<const std::byte> bytes() const;
  void* raw() { return data_; }
  const void* raw() const { return data_; }

  // Typed element pointer. T must be the dtype's storage type: float (float32), std::uint16_t
  // (float16, bfloat16), std::uint8_t (float8 formats, float4_e2m1 pairs, uint8, bool),
  // std::int8_t/int16_t/int32_t/int64_t. Throws fib::Error naming both on a mismatch.
  template <typename T>
  T* data() {
    if (!is_storage_type<T>(dtype_)) throw_type_mismatch(type_label<T>());
    return static_cast<T*>(static_cast<void*>(data_));
  }
  template <typename T>
  const T* data() const {
    if (!is_storage_type<T>(dtype_)) throw_type_mismatch(type_label<T>());
    return static_cast<const T*>(static_cast<const void*>(data_));
  }

  // Element `flat` (row-major) converted to/from double, for any dtype (slow path: tests,
  // constraint checks, error reports). Throws fib::Error when `flat` is out of range.
  // get: exact except int64 beyond 2^53. bool reads any non-zero byte as 1.
  // set: float formats round the value to float32 first and then to the format, as PyTorch
  // does when it fills a tensor from a Python float; integer and bool dtypes follow the
  // float -> integer rules of cast() below.
  double get(std::int64_t flat) const;
  void set(std::int64_t flat, double value);

  // A deep copy with its own storage (undefined stays undefined).
  Tensor clone() const;
  // Same storage, new shape with the same element count; throws fib::Error otherwise.
  Tensor reshape(Shape shape) const;

  // Bitwise equality of dtype, shape and bytes.
  bool same_bytes(const Tensor& other) const;

 private:
  template <typename T>
  static constexpr std::string_view type_label() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, float>)
      return "float";
    else if constexpr (std::is_same_v<U, double>)
      return "double";
    else if constexpr (std::is_same_v<U, std::uint16_t>)
      return "std::uint16_t";
    else if constexpr (std::is_same_v<U, std::uint8_t>)
      return "std::uint8_t";
    else if constexpr (std::is_same_v<U, std::int64_t>)
      return "std::int64_t";
    else if constexpr (std::is_same_v<U, std::int32_t>)
      return "std::int32_t";
    else if constexpr (std::is_same_v<U, std::int16_t>)
      return "std::int16_t";
    else if constexpr (std::is_same_v<U, std::int8_t>)
      return "std::int8_t";
    else if constexpr (std::is_same_v<U, bool>)
      return "bool";
    else
      return "an unsupported element type";
  }
  [[noreturn]] void throw_type_mismatch(std::string_view type) const;

  DType dtype_ = DType::kFloat32;
  Shape shape_;
  std::int64_t numel_ = 0;
  std::size_t nbytes_ = 0;
  std::shared_ptr<std::byte[]> storage_;
  std::byte* data_ = nullptr;
};

// Converts every element to float32 / from float32 (rounding as PyTorch's .to(dtype) does).
// from_float32 needs a float32 tensor.
Tensor to_float32(const Tensor& t);
Tensor from_float32(const Tensor& t, DType dtype);

// General dtype conversion, as PyTorch's .to(dtype) on the CPU where PyTorch is defined:
// - float -> float goes through float32 (exact, since float32 holds every narrower format).
// - integer -> float rounds to nearest even (int64 -> float16/bfloat16 goes through float32,
//   which can round twice, as PyTorch does).
// - float -> integer truncates toward zero. Where PyTorch is undefined, fib picks: NaN -> 0;
//   beyond the int64 range saturate to int64's min/max; then, as for integer -> integer,
//   narrower types keep the low bits (two's complement wrap: 300.0 -> int8 44, -1.0 -> uint8
//   255, which is also what PyTorch gives on x86 for values within int32's range).
// - anything -> bool is `!= 0` (NaN -> true); bool -> anything is 0 or 1.
// The same dtype gives a deep copy.
Tensor cast(const Tensor& t, DType dtype);

}  // namespace fib
