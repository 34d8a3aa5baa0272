#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

#include "fib/tensor/numeric.h"
#include "reference/kernels.h"

namespace fib::reference::detail {

void parallel_for(std::int64_t n, unsigned threads, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  const std::int64_t max_parts = std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, grain));
  const auto parts =
      static_cast<unsigned>(std::min<std::int64_t>(std::max(1u, threads), max_parts));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(parts - 1);
  const std::int64_t step = (n + parts - 1) / parts;
  // An exception must not escape a thread (that ends the process): each chunk keeps its own,
  // and the first, in chunk order, is rethrown to the caller once every thread has finished.
  std::vector<std::exception_ptr> errors(parts);
  for (unsigned p = 1; p < parts; ++p) {
    const std::int64_t b = p * step, e = std::min(n, b + step);
    if (b < e) {
      pool.emplace_back([&fn, &errors, p, b, e] {
        try {
          fn(b, e);
        } catch (...) {
          errors[p] = std::current_exception();
        }
      });
    }
  }
  try {
    fn(0, std::min(n, step));
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (auto& t : pool) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::vector<float> as_floats(const Tensor& t) {
  const Tensor f = t.dtype() == DType::kFloat32 ? t : to_float32(t);
  const float* p = f.data<float>();
  return std::vector<float>(p, p + f.numel());
}

void store_floats(const std::vector<float>& values, Tensor& out) {
  Tensor f(DType::kFloat32, out.shape());
  std::copy(values.begin(), values.end(), f.data<float>());
  Tensor r = out.dtype() == DType::kFloat32 ? f : from_float32(f, out.dtype());
  std::copy(r.bytes().begin(), r.bytes().end(), out.bytes().begin());
}

void load_floats(const Tensor& t, std::int64_t offset, std::int64_t n, float* out) {
  switch (t.dtype()) {
    case DType::kFloat32: {
      const float* p = t.data<float>() + offset;
      std::copy(p, p + n, out);
      break;
    }
    case DType::kBFloat16: {
      const std::uint16_t* p = t.data<std::uint16_t>() + offset;
      for (std::int64_t i = 0; i < n; ++i) out[i] = numeric::bf16_to_float(p[i]);
      break;
    }
    case DType::kFloat16: {
      const std::uint16_t* p = t.data<std::uint16_t>() + offset;
      for (std::int64_t i = 0; i < n; ++i) out[i] = numeric::fp16_to_float(p[i]);
      break;
    }
    default:
      for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(t.get(offset + i));
  }
}

void store_floats(const float* values, std::int64_t n, Tensor& t, std::int64_t offset) {
  switch (t.dtype()) {
    case DType::kFloat32:
      std::copy(values, values + n, t.data<float>() + offset);
      break;
    case DType::kBFloat16: {
      std::uint16_t* p = t.data<std::uint16_t>() + offset;
      for (std::int64_t i = 0; i < n; ++i) p[i] = numeric::float_to_bf16(values[i]);
      break;
    }
    case DType::kFloat16: {
      std::uint16_t* p = t.data<std::uint16_t>() + offset;
      for (std::int64_t i = 0; i < n; ++i) p[i] = numeric::float_to_fp16(values[i]);
      break;
    }
    default:
      // Other dtypes (float8, ...): the float value is exact in double, so set() rounds it as
      // from_float32 does.
      for (std::int64_t i = 0; i < n; ++i) t.set(offset + i, static_cast<double>(values[i]));
  }
}

Floats::Floats(const Tensor& t) {
  if (t.dtype() == DType::kFloat32) {
    p_ = t.data<float>();
  } else {
    copy_ = as_floats(t);
    p_ = copy_.data();
  }
}

}  // namespace fib::reference::detail
