// The bulk input fills as CUDA kernels: one thread per group of 4 elements (one Philox block),
// the same element functions as the host (counter_random.h, numeric.h), stores by dtype.
#include <cuda_runtime.h>

#include <algorithm>

#include "fib/cuda/input_fills.h"
#include "fib/tensor/numeric.h"

namespace fib::cuda {

namespace {

namespace cr = counter_random;

// The 4 elements of group g as one store where the group is whole; element by element in the
// tail (n not a multiple of 4).
__device__ void store_float_group(const float v[4], DType d, void* dst, std::int64_t g, int count) {
  const std::int64_t i0 = 4 * g;
  switch (d) {
    case DType::kFloat32:
      if (count == 4) {
        reinterpret_cast<float4*>(dst)[g] = make_float4(v[0], v[1], v[2], v[3]);
      } else {
        for (int j = 0; j < count; ++j) static_cast<float*>(dst)[i0 + j] = v[j];
      }
      return;
    case DType::kBFloat16:
    case DType::kFloat16: {
      std::uint16_t h[4];
      for (int j = 0; j < 4; ++j)
        h[j] = d == DType::kBFloat16 ? numeric::float_to_bf16(v[j]) : numeric::float_to_fp16(v[j]);
      if (count == 4) {
        reinterpret_cast<uint2*>(dst)[g] = make_uint2(h[0] | (static_cast<unsigned>(h[1]) << 16),
                                                      h[2] | (static_cast<unsigned>(h[3]) << 16));
      } else {
        for (int j = 0; j < count; ++j) static_cast<std::uint16_t*>(dst)[i0 + j] = h[j];
      }
      return;
    }
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2: {
      std::uint8_t b[4];
      for (int j = 0; j < 4; ++j)
        b[j] = d == DType::kFloat8E4M3FN ? numeric::float_to_fp8_e4m3fn(v[j])
                                         : numeric::float_to_fp8_e5m2(v[j]);
      if (count == 4) {
        reinterpret_cast<unsigned*>(dst)[g] = b[0] | (static_cast<unsigned>(b[1]) << 8) |
                                              (static_cast<unsigned>(b[2]) << 16) |
                                              (static_cast<unsigned>(b[3]) << 24);
      } else {
        for (int j = 0; j < count; ++j) static_cast<std::uint8_t*>(dst)[i0 + j] = b[j];
      }
      return;
    }
    case DType::kFloat4E2M1: {
      // Element 2k in the low nibble of byte k, 2k + 1 in the high one; a lone last element
      // fills its byte's low nibble and leaves the high one zero, as the host's cast does.
      auto* bytes = static_cast<std::uint8_t*>(dst) + i0 / 2;
      for (int j = 0; j < count; j += 2) {
        const unsigned lo = numeric::float_to_fp4_e2m1(v[j]);
        const unsigned hi = j + 1 < count ? numeric::float_to_fp4_e2m1(v[j + 1]) : 0u;
        bytes[j / 2] = static_cast<std::uint8_t>(lo | (hi << 4));
      }
      return;
    }
    default:
      return;
  }
}

__device__ void store_integer_group(const std::int64_t v[4], DType d, void* dst, std::int64_t i0,
                                    int count) {
  for (int j = 0; j < count; ++j) {
    switch (d) {
      case DType::kInt64:
        static_cast<std::int64_t*>(dst)[i0 + j] = v[j];
        break;
      case DType::kInt32:
        static_cast<std::int32_t*>(dst)[i0 + j] = static_cast<std::int32_t>(v[j]);
        break;
      case DType::kInt16:
        static_cast<std::int16_t*>(dst)[i0 + j] = static_cast<std::int16_t>(v[j]);
        break;
      case DType::kInt8:
        static_cast<std::int8_t*>(dst)[i0 + j] = static_cast<std::int8_t>(v[j]);
        break;
      default:  // uint8, bool
        static_cast<std::uint8_t*>(dst)[i0 + j] = static_cast<std::uint8_t>(v[j]);
        break;
    }
  }
}

__global__ void fib_bulk_fill(cr::FillSpec spec, std::uint64_t key, std::int64_t n, DType dtype,
                              void* dst) {
  const std::int64_t groups = (n + 3) / 4;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       g < groups; g += stride) {
    const int count = static_cast<int>(n - 4 * g < 4 ? n - 4 * g : 4);
    if (spec.dist == cr::Dist::kInteger) {
      std::int64_t v[4];
      cr::integer_group(spec, key, static_cast<std::uint64_t>(g), v);
      store_integer_group(v, dtype, dst, 4 * g, count);
    } else {
      float v[4];
      cr::float_group(spec, key, static_cast<std::uint64_t>(g), v);
      store_float_group(v, dtype, dst, g, count);
    }
  }
}

}  // namespace

DeviceTensor make_bulk_fill(const BulkFill& fill, cudaStream_t stream) {
  check_bulk_fill(fill);
  DeviceTensor t(fill.dtype, fill.shape);
  if (t.numel() == 0) return t;
  // A grid that covers every group where it can, capped: threads then stride over the rest.
  constexpr int kThreads = 256;
  const std::int64_t groups = (t.numel() + 3) / 4;
  const auto blocks = static_cast<unsigned>(
      std::min<std::int64_t>((groups + kThreads - 1) / kThreads, std::int64_t{1} << 20));
  fib_bulk_fill<<<blocks, kThreads, 0, stream>>>(fill.spec, fill.key, t.numel(), fill.dtype,
                                                 t.raw());
  FIB_CUDA_CHECK_LAUNCH();
  return t;
}

DeviceInputs materialize_inputs_on_device(const Definition& def, const Workload& w,
                                          MaterializeOptions options, cudaStream_t stream) {
  options.defer_bulk_fills = true;
  DeviceInputs out;
  out.host = materialize_inputs(def, w, options);
  for (const auto& [name, fill] : out.host.deferred)
    out.device.emplace(name, make_bulk_fill(fill, stream));
  FIB_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

}  // namespace fib::cuda
