// cuda:gdn: Gated Delta Net (Qwen3-Next linear attention), decode / mtp / prefill, k-last state
// layout [.., H, V, K] — the CPU reference's recurrence (src/reference/gdn.cpp) in its order of
// operations, per token and value head h (q/k head h / (Hv / Hq)), with S the [V, K] state:
//   g = exp(-exp(A_log) * softplus(a + dt_bias)),  beta = sigmoid(b)
//   S' = g * S;  old_v = S' k;  new_v = beta * v + (1 - beta) * old_v
//   S  = (S' - old_v k^T) + new_v k^T;   o = scale * S q   (scale = 1/sqrt(K) when absent or 0)
// Every value row r of S evolves on its own (old_v[r] and o[r] read row r only), so a block
// owns 16 rows of one (sequence, head) and walks the tokens in order; 8 threads hold a row in
// registers, thread j the columns c = j (mod 8) — the CPU's eight partial sums of a dot product,
// combined in its order ((0+1)+(2+3))+((4+5)+(6+7)). Output rounded once to its dtype; state
// fp32. Variants, from the interface as on the CPU:
//   cu_seqlens             prefill: ragged sequences; a zero-length sequence's new_state is 0.
//   initial_state_indices  mtp: each batch row starts from a pool slot (negative: from the end);
//                          final_state is the input pool unchanged.
//   otherwise              decode: state [B, Hv, V, K] (absent: zeros) -> new_state.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "reference_cuda/attn_support.h"
#include "reference_cuda/device_math.cuh"

namespace fib::reference_cuda::detail {

namespace {

using device::Code;

constexpr int kRows = 16;  // value rows a block
constexpr int kThreads = 8 * kRows;

enum class Mode : std::uint8_t { kDecode, kMtp, kPrefill };

struct GdnParams {
  Mode mode;
  const void *q, *k, *v, *a, *b, *a_log, *dt_bias;
  Code q_t, k_t, v_t, a_t, b_t, a_log_t, dt_bias_t;
  const float* state;  // nullptr: zeros
  const void* index;   // prefill: cu_seqlens; mtp: initial_state_indices
  Code index_t;
  long long total, t_len, pool;
  int hq, hk, hv, kd, vd;
  float scale;
  void* out;
  Code out_t;
  float* new_state;  // nullptr for mtp
  int* flag;
};

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

template <int KPT>
__global__ void __launch_bounds__(kThreads) gdn_rows(GdnParams p) {
  __shared__ float sq[8 * KPT], sk[8 * KPT], sv[kRows], sgb[2];
  const long long s = blockIdx.x;
  const int h = blockIdx.y, r0 = blockIdx.z * kRows;
  const int tid = threadIdx.x, sub = tid & 7, r = r0 + (tid >> 3);
  const bool row_ok = r < p.vd;

  long long start, len, in, out;
  if (p.mode == Mode::kPrefill) {
    const long long lo = device::load_index(p.index, s, p.index_t);
    const long long hi = device::load_index(p.index, s + 1, p.index_t);
    if (hi > lo && (lo < 0 || hi > p.total)) {
      if (tid == 0) atomicExch(p.flag, 1);
      return;
    }
    start = lo;
    len = hi > lo ? hi - lo : 0;
    in = out = s;
  } else {
    start = s * p.t_len;
    len = p.t_len;
    in = out = s;
    if (p.mode == Mode::kMtp) {
      in = device::load_index(p.index, s, p.index_t);
      if (in < 0) in += p.pool;  // Python indexing, as the reference does
      if (in < 0 || in >= p.pool) {
        if (tid == 0) atomicExch(p.flag, 1);
        return;
      }
      out = -1;
    }
  }
  if (len == 0) return;  // prefill: new_state stays zero

  const long long head_state = static_cast<long long>(p.vd) * p.kd;
  float st[KPT], kr[KPT], qr[KPT];
  const float* src = p.state ? p.state + (in * p.hv + h) * head_state + r * p.kd : nullptr;
#pragma unroll
  for (int i = 0; i < KPT; ++i) {
    const int c = sub + 8 * i;
    st[i] = src != nullptr && row_ok && c < p.kd ? src[c] : 0.f;
  }
  const int q_ratio = p.hv / p.hq, k_ratio = p.hv / p.hk;
  const float a_log = device::load_float(p.a_log, h, p.a_log_t);
  const float dt_bias = device::load_float(p.dt_bias, h, p.dt_bias_t);

  for (long long i = 0; i < len; ++i) {
    const long long tok = start + i;
    __syncthreads();  // the previous token's readers are done
    for (int c = tid; c < p.kd; c += kThreads) {
      sq[c] = device::load_float(p.q, (tok * p.hq + h / q_ratio) * p.kd + c, p.q_t);
      sk[c] = device::load_float(p.k, (tok * p.hk + h / k_ratio) * p.kd + c, p.k_t);
    }
    if (tid < kRows)
      sv[tid] = r0 + tid < p.vd ? device::load_float(p.v, (tok * p.hv + h) * p.vd + r0 + tid, p.v_t)
                                : 0.f;
    if (tid == 0) {
      const long long gi = tok * p.hv + h;
      sgb[0] = expf(-expf(a_log) * softplus(device::load_float(p.a, gi, p.a_t) + dt_bias));
      sgb[1] = 1.0f / (1.0f + expf(-device::load_float(p.b, gi, p.b_t)));
    }
    __syncthreads();
    const float g = sgb[0], beta = sgb[1];
    float part = 0.f;
#pragma unroll
    for (int j = 0; j < KPT; ++j) {
      const int c = sub + 8 * j;
      kr[j] = c < p.kd ? sk[c] : 0.f;
      qr[j] = c < p.kd ? sq[c] : 0.f;
      st[j] *= g;
      part += st[j] * kr[j];
    }
    part += __shfl_xor_sync(0xffffffffu, part, 1);
    part += __shfl_xor_sync(0xffffffffu, part, 2);
    part += __shfl_xor_sync(0xffffffffu, part, 4);
    const float ov = part;
    const float nv = beta * sv[tid >> 3] + (1.0f - beta) * ov;
    float o = 0.f;
#pragma unroll
    for (int j = 0; j < KPT; ++j) {
      st[j] = (st[j] - kr[j] * ov) + kr[j] * nv;
      o += st[j] * qr[j];
    }
    o += __shfl_xor_sync(0xffffffffu, o, 1);
    o += __shfl_xor_sync(0xffffffffu, o, 2);
    o += __shfl_xor_sync(0xffffffffu, o, 4);
    if (sub == 0 && row_ok)
      device::store_float(p.out, (tok * p.hv + h) * p.vd + r, p.out_t, p.scale * o);
  }
  if (out >= 0 && row_ok) {
    float* dst = p.new_state + (out * p.hv + h) * head_state + r * p.kd;
#pragma unroll
    for (int i = 0; i < KPT; ++i) {
      const int c = sub + 8 * i;
      if (c < p.kd) dst[c] = st[i];
    }
  }
}

const DeviceTensor* optional_tensor(const DeviceArguments& args, const char* name) {
  return args.tensors.count(name) ? &args.tensor(name) : nullptr;
}

class Gdn final : public Kernel {
 public:
  std::string_view id() const override { return "cuda:gdn"; }
  bool supports(const Definition& def, std::string* why) const override {
    if (!cpu_supports("gdn", def, why)) return false;
    const TensorSpec* q = def.input("q");
    const auto& shape = *q->shape;
    const Axis* kd = def.axis(shape.back());
    if (kd && kd->value && *kd->value > 256) {
      *why = "the CUDA gdn holds a state row of at most 256 keys in registers";
      return false;
    }
    return true;
  }

  DeviceOutputs run(const CallContext& ctx, const DeviceArguments& args) const override {
    const Definition& def = ctx.definition;
    const bool prefill = def.input("cu_seqlens") != nullptr;
    const bool mtp = def.input("initial_state_indices") != nullptr;
    const DeviceTensor& q = args.tensor("q");
    const DeviceTensor& k = args.tensor("k");
    const DeviceTensor& v = args.tensor("v");
    const std::size_t hd = q.rank() - 2;
    GdnParams p{};
    p.mode = prefill ? Mode::kPrefill : mtp ? Mode::kMtp : Mode::kDecode;
    p.hq = static_cast<int>(q.dim(hd));
    p.hk = static_cast<int>(k.dim(hd));
    p.hv = static_cast<int>(v.dim(hd));
    p.kd = static_cast<int>(q.dim(hd + 1));
    p.vd = static_cast<int>(v.dim(hd + 1));
    if (p.hq <= 0 || p.hk <= 0 || p.hv % p.hq != 0 || p.hv % p.hk != 0 || k.dim(hd + 1) != p.kd) {
      throw Error(def.name, "value heads " + std::to_string(p.hv) +
                                " must be a multiple of q heads " + std::to_string(p.hq) +
                                " and k heads " + std::to_string(p.hk));
    }
    if (p.kd > 256) throw Error(def.name, "the CUDA gdn handles head sizes up to 256");
    double scale = args.scalars.count("scale") ? args.scalar_double("scale") : 0.0;
    if (scale == 0.0) scale = 1.0 / std::sqrt(static_cast<double>(p.kd));
    p.scale = static_cast<float>(scale);
    const auto operand = [&args](const char* name, const void*& ptr, Code& t) {
      const DeviceTensor& x = args.tensor(name);
      ptr = x.raw();
      t = device::code(x.dtype());
    };
    operand("q", p.q, p.q_t);
    operand("k", p.k, p.k_t);
    operand("v", p.v, p.v_t);
    operand("a", p.a, p.a_t);
    operand("b", p.b, p.b_t);
    operand("A_log", p.a_log, p.a_log_t);
    operand("dt_bias", p.dt_bias, p.dt_bias_t);

    cudaStream_t stream = ctx.stream;
    DeviceTensor out = make_output(ctx, "output");
    DeviceTensor new_state = make_output(ctx, mtp ? "final_state" : "new_state");
    const DeviceTensor* state = optional_tensor(args, mtp ? "initial_state" : "state");
    if (state != nullptr && state->dtype() != DType::kFloat32)
      throw Error(def.name, "the recurrent state must be float32, as the reference keeps it");
    if (new_state.dtype() != DType::kFloat32)
      throw Error(def.name, "the recurrent state output must be float32");
    std::int64_t seqs = 0;
    if (prefill) {
      const DeviceTensor& cu = args.tensor("cu_seqlens");
      seqs = std::max<std::int64_t>(cu.numel() - 1, 0);
      if (seqs > new_state.dim(0) || (state != nullptr && seqs > state->dim(0))) {
        throw Error(def.name, "cu_seqlens describes " + std::to_string(seqs) +
                                  " sequences, more than the state holds");
      }
      p.index = cu.raw();
      p.index_t = device::code(cu.dtype());
      p.total = q.dim(0);
    } else {
      seqs = q.dim(0);
      p.t_len = q.dim(1);
      if (mtp) {
        const DeviceTensor& idx = args.tensor("initial_state_indices");
        p.index = idx.raw();
        p.index_t = device::code(idx.dtype());
        p.pool = state->dim(0);
      } else if (state != nullptr && state->dim(0) < seqs) {
        throw Error(def.name, "state holds fewer rows than the batch");
      }
    }
    p.state = state != nullptr ? state->data<float>() : nullptr;
    p.out = out.raw();
    p.out_t = device::code(out.dtype());
    p.new_state = mtp ? nullptr : new_state.data<float>();
    BadInputFlag flag(stream);
    p.flag = flag.get();

    FIB_CUDA_CHECK(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream));
    if (mtp) {
      FIB_CUDA_CHECK(cudaMemcpyAsync(new_state.raw(), state->raw(), state->nbytes(),
                                     cudaMemcpyDeviceToDevice, stream));
    } else {
      FIB_CUDA_CHECK(cudaMemsetAsync(new_state.raw(), 0, new_state.nbytes(), stream));
    }
    if (seqs > 0 && p.hv > 0 && p.vd > 0) {
      const dim3 grid(static_cast<unsigned>(seqs), static_cast<unsigned>(p.hv),
                      static_cast<unsigned>(ceil_div(p.vd, kRows)));
      if (p.kd <= 128) {
        gdn_rows<16><<<grid, kThreads, 0, stream>>>(p);
      } else {
        gdn_rows<32><<<grid, kThreads, 0, stream>>>(p);
      }
      FIB_CUDA_CHECK_LAUNCH();
    }
    flag.poison_if_set({&out, &new_state});
    DeviceOutputs o;
    o.emplace("output", std::move(out));
    o.emplace(mtp ? "final_state" : "new_state", std::move(new_state));
    return o;
  }
};

}  // namespace

// Decode, mtp, prefill.
void add_gdn(KernelList& list) { list.push_back(std::make_unique<Gdn>()); }

}  // namespace fib::reference_cuda::detail
