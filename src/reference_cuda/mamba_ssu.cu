// cuda:mamba_ssu: Mamba2 selective state update (decode) — the CPU reference's math
// (src/reference/mamba_ssu.cpp) in fp32:
//   dt = softplus(dt + dt_bias);  dA = exp(A * dt)                       [head, head_dim, dstate]
//   s  = state[slot] * dA + (dt * x) * B[group]       (group = head / (nheads / ngroups))
//   new_state[slot] = s (rounded to the state dtype);  y = sum(s * C[group]) + x * D
// y uses the fp32 s, before the state's rounding. A batch row whose slot is negative (PAD) is
// skipped (output 0, no slot changes); slots nobody references are copied through. Rows of a
// (head, head_dim) pair are independent, so one warp owns one and walks the batch in order:
// two batch rows naming the same slot chain (the second reads the first's rounded state), as
// the reference's loop does. A slot past the cache (the CPU reference throws) poisons the
// outputs with NaN.
#include <cuda_runtime.h>

#include <string>

#include "reference_cuda/attn_support.h"
#include "reference_cuda/device_math.cuh"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

constexpr int kWarps = 8;

struct SsuParams {
  const void *x, *dt, *a, *bm, *cm, *d, *dt_bias, *slots;
  Code x_t, dt_t, a_t, b_t, c_t, d_t, dt_bias_t, slots_t;
  long long batch, nheads, hd, ngroups, ds, cache;
  void* state;  // new_state, updated in place
  Code state_t;
  void* out;
  Code out_t;
  int* flag;
};

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__global__ void __launch_bounds__(32 * kWarps) ssu_rows(SsuParams p) {
  const long long row = blockIdx.x * static_cast<long long>(kWarps) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= p.nheads * p.hd) return;
  const long long h = row / p.hd, hp = row;  // hp = h * hd + p
  const long long g = h / (p.nheads / p.ngroups);
  for (long long b = 0; b < p.batch; ++b) {
    const long long slot = device::load_index(p.slots, b, p.slots_t);
    if (slot < 0) continue;
    if (slot >= p.cache) {
      if (lane == 0) atomicExch(p.flag, 1);
      continue;
    }
    const long long xi = b * p.nheads * p.hd + hp;
    const float x = device::load_float(p.x, xi, p.x_t);
    const float dtf = softplus(device::load_float(p.dt, xi, p.dt_t) +
                               device::load_float(p.dt_bias, hp, p.dt_bias_t));
    const float dtx = dtf * x;
    const long long srow = (slot * p.nheads * p.hd + hp) * p.ds;
    const long long grow = (b * p.ngroups + g) * p.ds;
    float acc = 0.f;
    for (long long n = lane; n < p.ds; n += 32) {
      const float dA = expf(device::load_float(p.a, hp * p.ds + n, p.a_t) * dtf);
      const float v = device::load_float(p.state, srow + n, p.state_t) * dA +
                      dtx * device::load_float(p.bm, grow + n, p.b_t);
      acc += v * device::load_float(p.cm, grow + n, p.c_t);
      device::store_float(p.state, srow + n, p.state_t, v);
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0)
      device::store_float(p.out, xi, p.out_t, acc + x * device::load_float(p.d, hp, p.d_t));
  }
}

__global__ void convert_state(const void* src, Code src_t, void* dst, Code dst_t, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    device::store_float(dst, i, dst_t, device::load_float(src, i, src_t));
  }
}

bool float_state(DType t) {
  return t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat16;
}

class MambaSsu final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:mamba_ssu"; }
  bool supports(const Definition& def, std::string* why) const override {
    return cpu_supports("mamba_ssu", def, why);
  }

  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const Definition& def = ctx.definition;
    const DeviceTensor& state = args.tensor("state");
    const DeviceTensor& x = args.tensor("x");
    const DeviceTensor& bm = args.tensor("B");
    SsuParams p{};
    p.batch = x.dim(0);
    p.nheads = x.dim(1);
    p.hd = x.dim(2);
    p.ngroups = bm.dim(1);
    p.ds = bm.dim(2);
    p.cache = state.dim(0);
    if (p.ngroups <= 0 || p.nheads % p.ngroups != 0) {
      throw Error(def.name, "nheads " + std::to_string(p.nheads) +
                                " is not a multiple of ngroups " + std::to_string(p.ngroups));
    }
    DeviceTensor out = make_output(ctx, "output");
    DeviceTensor new_state = make_output(ctx, "new_state");
    if (!float_state(state.dtype()) || !float_state(new_state.dtype())) {
      throw Error(def.name, std::string("state is ") + std::string(dtype_name(state.dtype())) +
                                "; float32, bfloat16 or float16 expected");
    }
    const auto operand = [&args](const char* name, const void*& ptr, Code& t) {
      const DeviceTensor& v = args.tensor(name);
      ptr = v.raw();
      t = device::code(v.dtype());
    };
    operand("x", p.x, p.x_t);
    operand("dt", p.dt, p.dt_t);
    operand("A", p.a, p.a_t);
    operand("B", p.bm, p.b_t);
    operand("C", p.cm, p.c_t);
    operand("D", p.d, p.d_t);
    operand("dt_bias", p.dt_bias, p.dt_bias_t);
    operand("state_batch_indices", p.slots, p.slots_t);
    p.state = new_state.raw();
    p.state_t = device::code(new_state.dtype());
    p.out = out.raw();
    p.out_t = device::code(out.dtype());

    cudaStream_t stream = ctx.stream;
    BadInputFlag flag(stream);
    p.flag = flag.get();
    // new_state starts as the input state (slots nobody references pass through).
    if (new_state.dtype() == state.dtype()) {
      FIB_CUDA_CHECK(cudaMemcpyAsync(new_state.raw(), state.raw(), state.nbytes(),
                                     cudaMemcpyDeviceToDevice, stream));
    } else if (state.numel() > 0) {
      convert_state<<<static_cast<unsigned>(
                          std::min<std::int64_t>(ceil_div(state.numel(), 256), 4096)),
                      256, 0, stream>>>(state.raw(), device::code(state.dtype()), new_state.raw(),
                                        device::code(new_state.dtype()), state.numel());
      FIB_CUDA_CHECK_LAUNCH();
    }
    FIB_CUDA_CHECK(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream));
    const std::int64_t rows = p.nheads * p.hd;
    if (rows > 0 && p.batch > 0) {
      ssu_rows<<<static_cast<unsigned>(ceil_div(rows, kWarps)), 32 * kWarps, 0, stream>>>(p);
      FIB_CUDA_CHECK_LAUNCH();
    }
    flag.poison_if_set({&out, &new_state});
    DeviceOutputs o;
    o.emplace("output", std::move(out));
    o.emplace("new_state", std::move(new_state));
    return o;
  }
};

}  // namespace

std::unique_ptr<Kernel> make_mamba_ssu() { return std::make_unique<MambaSsu>(); }

}  // namespace fib::reference_cuda::detail
