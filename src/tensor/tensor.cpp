#include "fib/tensor/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "fib/base/diagnostics.h"
#include "fib/tensor/numeric.h"

namespace fib {

namespace {

std::string_view storage_type_name(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float";
    case DType::kFloat16:
    case DType::kBFloat16:
      return "std::uint16_t";
    case DType::kInt64:
      return "std::int64_t";
    case DType::kInt32:
      return "std::int32_t";
    case DType::kInt16:
      return "std::int16_t";
    case DType::kInt8:
      return "std::int8_t";
    default:
      return "std::uint8_t";
  }
}

std::shared_ptr<std::byte[]> allocate_zeroed(std::size_t n, const Shape& shape, DType dtype) {
  void* p = ::operator new (n, std::align_val_t{kTensorAlignment}, std::nothrow);
  if (p == nullptr) {
    throw Error("", fmt::format("cannot allocate {} bytes for a tensor of dtype {} and shape {}", n,
                                dtype_name(dtype), shape_to_string(shape)));
  }
  std::memset(p, 0, n);
  return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p), [](std::byte* q) {
    ::operator delete (q, std::align_val_t{kTensorAlignment});
  });
}

std::uint8_t fp4_nibble(const std::byte* data, std::int64_t i) {
  const auto b = static_cast<std::uint8_t>(data[i / 2]);
  return static_cast<std::uint8_t>((i & 1) ? (b >> 4) : (b & 0xF));
}

void set_fp4_nibble(std::byte* data, std::int64_t i, std::uint8_t nibble) {
  auto b = static_cast<std::uint8_t>(data[i / 2]);
  b = (i & 1) ? static_cast<std::uint8_t>((b & 0x0F) | ((nibble & 0xF) << 4))
              : static_cast<std::uint8_t>((b & 0xF0) | (nibble & 0xF));
  data[i / 2] = static_cast<std::byte>(b);
}

// Truncation toward zero with the out-of-range choices documented at cast() in tensor.h.
std::int64_t float_to_int64(double v) {
  if (std::isnan(v)) return 0;
  constexpr double kTwo63 = 9223372036854775808.0;
  if (v >= kTwo63) return std::numeric_limits<std::int64_t>::max();
  if (v < -kTwo63) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(v);
}

// Calls fn(T{}) with the storage type of an integer or bool dtype.
template <typename Fn>
void with_int_type(DType t, Fn&& fn) {
  switch (t) {
    case DType::kInt64:
      fn(std::int64_t{});
      return;
    case DType::kInt32:
      fn(std::int32_t{});
      return;
    case DType::kInt16:
      fn(std::int16_t{});
      return;
    case DType::kInt8:
      fn(std::int8_t{});
      return;
    case DType::kUInt8:
    case DType::kBool:
      fn(std::uint8_t{});
      return;
    default:
      throw Error("", fmt::format("internal: {} is not an integer dtype", dtype_name(t)));
  }
}

void require_defined(const Tensor& t, std::string_view what) {
  if (!t.defined()) throw Error("", fmt::format("{} of an undefined tensor", what));
}

// Integer value of element i of an integer or bool tensor.
std::int64_t read_int(const Tensor& t, std::int64_t i) {
  std::int64_t out = 0;
  with_int_type(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    out = static_cast<std::int64_t>(t.data<T>()[i]);
  });
  if (t.dtype() == DType::kBool) out = out != 0;
  return out;
}

void write_int(Tensor& t, std::int64_t i, std::int64_t v) {
  if (t.dtype() == DType::kBool) {
    t.data<std::uint8_t>()[i] = v != 0;
    return;
  }
  with_int_type(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // C++20 defines integer narrowing as keeping the low bits (two's complement).
    t.data<T>()[i] = static_cast<T>(v);
  });
}

float read_float(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.data<float>()[i];
    case DType::kFloat16:
      return numeric::fp16_to_float(t.data<std::uint16_t>()[i]);
    case DType::kBFloat16:
      return numeric::bf16_to_float(t.data<std::uint16_t>()[i]);
    case DType::kFloat8E4M3FN:
      return numeric::fp8_e4m3fn_to_float(t.data<std::uint8_t>()[i]);
    case DType::kFloat8E5M2:
      return numeric::fp8_e5m2_to_float(t.data<std::uint8_t>()[i]);
    case DType::kFloat4E2M1:
      return numeric::fp4_e2m1_to_float(fp4_nibble(static_cast<const std::byte*>(t.raw()), i));
    default:
      return static_cast<float>(read_int(t, i));
  }
}

void write_float(Tensor& t, std::int64_t i, float v) {
  switch (t.dtype()) {
    case DType::kFloat32:
      t.data<float>()[i] = v;
      return;
    case DType::kFloat16:
      t.data<std::uint16_t>()[i] = numeric::float_to_fp16(v);
      return;
    case DType::kBFloat16:
      t.data<std::uint16_t>()[i] = numeric::float_to_bf16(v);
      return;
    case DType::kFloat8E4M3FN:
      t.data<std::uint8_t>()[i] = numeric::float_to_fp8_e4m3fn(v);
      return;
    case DType::kFloat8E5M2:
      t.data<std::uint8_t>()[i] = numeric::float_to_fp8_e5m2(v);
      return;
    case DType::kFloat4E2M1:
      set_fp4_nibble(static_cast<std::byte*>(t.raw()), i, numeric::float_to_fp4_e2m1(v));
      return;
    default:
      // NaN is `!= 0`, so it makes a true bool (as in PyTorch).
      if (t.dtype() == DType::kBool) {
        t.data<std::uint8_t>()[i] = v != 0.0f;
      } else {
        write_int(t, i, float_to_int64(static_cast<double>(v)));
      }
      return;
  }
}

// out[i] = enc(in[i]) over a whole tensor, in a loop the compiler can vectorize.
template <typename Out, typename In, typename Fn>
void map_elements(const In* in, Out* out, std::int64_t n, Fn fn) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = fn(in[i]);
}

}  // namespace

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) {
      throw Error("",
                  fmt::format("shape {} has a negative dimension ({})", shape_to_string(shape), d));
    }
    if (__builtin_mul_overflow(n, d, &n)) {
      throw Error("", fmt::format("shape {} has more elements than fit in 64 bits",
                                  shape_to_string(shape)));
    }
  }
  return n;
}

std::string shape_to_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  const auto bytes = dtype_storage_bytes(dtype_, static_cast<std::uint64_t>(numel_));
  if (!bytes || *bytes > std::numeric_limits<std::size_t>::max() / 2) {
    throw Error("", fmt::format("a tensor of dtype {} and shape {} is too large to allocate",
                                dtype_name(dtype_), shape_to_string(shape_)));
  }
  nbytes_ = static_cast<std::size_t>(*bytes);
  storage_ = allocate_zeroed(nbytes_, shape_, dtype_);
  data_ = storage_.get();
}

Tensor Tensor::view(DType dtype, Shape shape, std::shared_ptr<std::byte[]> storage) {
  if (!storage) throw Error("", "a tensor view needs memory (got a null pointer)");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  const auto bytes = dtype_storage_bytes(dtype, static_cast<std::uint64_t>(t.numel_));
  if (!bytes) throw Error("", "a tensor view's shape is too large");
  t.nbytes_ = static_cast<std::size_t>(*bytes);
  t.storage_ = std::move(storage);
  t.data_ = t.storage_.get();
  return t;
}

std::span<std::byte> Tensor::bytes() { return {data_, nbytes_}; }
std::span<const std::byte> Tensor::bytes() const { return {data_, nbytes_}; }

void Tensor::throw_type_mismatch(std::string_view type) const {
  throw Error("",
              fmt::format("a {} tensor cannot be accessed as {}: its element storage type is {}",
                          dtype_name(dtype_), type, storage_type_name(dtype_)));
}

double Tensor::get(std::int64_t flat) const {
  if (flat < 0 || flat >= numel_) {
    throw Error("", fmt::format("element {} is out of range for a tensor of shape {}", flat,
                                shape_to_string(shape_)));
  }
  if (dtype_is_float(dtype_)) return static_cast<double>(read_float(*this, flat));
  return static_cast<double>(read_int(*this, flat));
}

void Tensor::set(std::int64_t flat, double value) {
  if (flat < 0 || flat >= numel_) {
    throw Error("", fmt::format("element {} is out of range for a tensor of shape {}", flat,
                                shape_to_string(shape_)));
  }
  if (dtype_is_float(dtype_)) {
    write_float(*this, flat, static_cast<float>(value));
  } else if (dtype_ == DType::kBool) {
    data<std::uint8_t>()[flat] = value != 0.0;
  } else {
    write_int(*this, flat, float_to_int64(value));
  }
}

Tensor Tensor::clone() const {
  if (!defined()) return {};
  Tensor out(dtype_, shape_);
  if (nbytes_ > 0) std::memcpy(out.data_, data_, nbytes_);
  return out;
}

Tensor Tensor::reshape(Shape shape) const {
  const std::int64_t n = shape_numel(shape);
  if (n != numel_) {
    throw Error("",
                fmt::format("cannot reshape a tensor of shape {} ({} elements) to {} ({} elements)",
                            shape_to_string(shape_), numel_, shape_to_string(shape), n));
  }
  Tensor out = *this;
  out.shape_ = std::move(shape);
  return out;
}

bool Tensor::same_bytes(const Tensor& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_ || defined() != other.defined())
    return false;
  return nbytes_ == other.nbytes_ &&
         (nbytes_ == 0 || std::memcmp(data_, other.data_, nbytes_) == 0);
}

Tensor to_float32(const Tensor& t) {
  require_defined(t, "to_float32");
  Tensor out(DType::kFloat32, t.shape());
  float* o = out.data<float>();
  const std::int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::kFloat32:
      if (n > 0) std::memcpy(o, t.raw(), t.nbytes());
      break;
    case DType::kFloat16:
      map_elements(t.data<std::uint16_t>(), o, n, [](auto v) { return numeric::fp16_to_float(v); });
      break;
    case DType::kBFloat16:
      map_elements(t.data<std::uint16_t>(), o, n, [](auto v) { return numeric::bf16_to_float(v); });
      break;
    case DType::kFloat8E4M3FN:
      map_elements(t.data<std::uint8_t>(), o, n,
                   [](auto v) { return numeric::fp8_e4m3fn_to_float(v); });
      break;
    case DType::kFloat8E5M2:
      map_elements(t.data<std::uint8_t>(), o, n,
                   [](auto v) { return numeric::fp8_e5m2_to_float(v); });
      break;
    default:
      for (std::int64_t i = 0; i < n; ++i) o[i] = read_float(t, i);
      break;
  }
  return out;
}

Tensor from_float32(const Tensor& t, DType dtype) {
  require_defined(t, "from_float32");
  if (t.dtype() != DType::kFloat32) {
    throw Error("",
                fmt::format("from_float32 needs a float32 tensor, not {}", dtype_name(t.dtype())));
  }
  if (dtype == DType::kFloat32) return t.clone();
  Tensor out(dtype, t.shape());
  const float* in = t.data<float>();
  const std::int64_t n = t.numel();
  switch (dtype) {
    case DType::kFloat16:
      map_elements(in, out.data<std::uint16_t>(), n,
                   [](auto v) { return numeric::float_to_fp16(v); });
      break;
    case DType::kBFloat16:
      map_elements(in, out.data<std::uint16_t>(), n,
                   [](auto v) { return numeric::float_to_bf16(v); });
      break;
    case DType::kFloat8E4M3FN:
      map_elements(in, out.data<std::uint8_t>(), n,
                   [](auto v) { return numeric::float_to_fp8_e4m3fn(v); });
      break;
    case DType::kFloat8E5M2:
      map_elements(in, out.data<std::uint8_t>(), n,
                   [](auto v) { return numeric::float_to_fp8_e5m2(v); });
      break;
    case DType::kFloat4E2M1: {
      auto* o = out.data<std::uint8_t>();
      for (std::int64_t j = 0; j < n / 2; ++j) {
        o[j] = static_cast<std::uint8_t>(numeric::float_to_fp4_e2m1(in[2 * j]) |
                                         (numeric::float_to_fp4_e2m1(in[2 * j + 1]) << 4));
      }
      if (n % 2) o[n / 2] = numeric::float_to_fp4_e2m1(in[n - 1]);
      break;
    }
    default:
      for (std::int64_t i = 0; i < n; ++i) write_float(out, i, in[i]);
      break;
  }
  return out;
}

Tensor cast(const Tensor& t, DType dtype) {
  require_defined(t, "cast");
  if (t.dtype() == dtype) return t.clone();
  const bool src_float = dtype_is_float(t.dtype());
  const bool dst_float = dtype_is_float(dtype);
  if (src_float && dst_float) {
    if (t.dtype() == DType::kFloat32) return from_float32(t, dtype);
    Tensor f = to_float32(t);
    return dtype == DType::kFloat32 ? f : from_float32(f, dtype);
  }
  Tensor out(dtype, t.shape());
  const std::int64_t n = t.numel();
  if (src_float) {
    for (std::int64_t i = 0; i < n; ++i) write_float(out, i, read_float(t, i));
  } else if (dst_float) {
    // Integers go to float32 with one rounding (static_cast<float>), then to the format.
    for (std::int64_t i = 0; i < n; ++i) write_float(out, i, static_cast<float>(read_int(t, i)));
  } else {
    for (std::int64_t i = 0; i < n; ++i) write_int(out, i, read_int(t, i));
  }
  return out;
}

}  // namespace fib
