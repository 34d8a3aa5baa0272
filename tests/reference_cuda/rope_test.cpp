// CUDA rope against the CPU reference: the corpus definition (NeoX) at several shapes, the same
// interface read as GPT-J (interleaved pairs) by its name, Python-style negative positions, a
// position outside the cache (the CPU throws; the CUDA kernel gives that token NaN), a single
// token and head, and the largest prefill shape timed.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "reference_cuda/parity_util.h"

namespace fib::testing {
namespace {

// Both sides compute the same fp32 products and sums element by element (no fused multiply-add
// on either: the CUDA kernel uses __fmul_rn/__fsub_rn, the host build does not contract), then
// round once to bf16, so the outputs are expected bit-identical. The tolerance still admits one
// bf16 ulp (<= 2^-7 relative) in case a host compiler contracts x1*c - x2*s into an FMA.
constexpr ParityTolerance kRope{1e-6, 8e-3};

AxisValues rope_axes(std::int64_t tokens, std::int64_t qo, std::int64_t kv, std::int64_t cache) {
  return {
      {"num_tokens", tokens}, {"num_qo_heads", qo}, {"num_kv_heads", kv}, {"max_seq_len", cache}};
}

// The corpus definition renamed GPT-J style: its reference text has no strided slice, so the
// name decides the pairing (reference::detail::rope_style), for the CPU and CUDA kernels alike.
Definition gptj(const Definition& neox) {
  return edited_definition(
      neox, [](Json& j) { j["name"] = "rope_with_cos_sin_cache_gptj_style_d128_rd64"; });
}

// The corpus definition with another head_size and rotary_dim, q/k (and outputs) of `dtype`, and
// optionally GPT-J pairing: shapes and dtypes the vectorized kernel leaves to the generic one.
Definition variant(const Definition& neox, std::int64_t head, std::int64_t rot,
                   const std::string& dtype, bool interleaved) {
  return edited_definition(neox, [&](Json& j) {
    if (interleaved) j["name"] = "rope_with_cos_sin_cache_gptj_style_variant";
    j["axes"]["head_size"]["value"] = head;
    j["axes"]["rotary_dim"]["value"] = rot;
    for (const char* t : {"q", "k"}) j["inputs"][t]["dtype"] = dtype;
    for (const char* t : {"q_out", "k_out"}) j["outputs"][t]["dtype"] = dtype;
  });
}

MaterializedInputs synthesize(const Definition& def, const AxisValues& axes, std::uint64_t seed) {
  Workload w;
  w.uuid = "rope";
  w.axes = axes;
  MaterializeOptions opts;
  opts.seed = seed;
  return materialize_inputs(def, w, opts);
}

TEST(CudaReferenceRope, CorpusDefinitionMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
  // One token and one head each; a decode-like batch; a prefill with 48/8 heads.
  for (const auto& axes :
       {rope_axes(1, 1, 1, 1), rope_axes(37, 8, 2, 4096), rope_axes(2048, 48, 8, 8192)}) {
    EXPECT_EQ(expect_cuda_matches_cpu(def, axes, 5, {{"*", kRope}}), "cuda:rope");
  }
}

TEST(CudaReferenceRope, GptjStylePairsAdjacentElements) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition neox =
      corpus_definition(corpus, "rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
  const Definition def = gptj(neox);
  const AxisValues axes = rope_axes(53, 4, 2, 512);
  EXPECT_EQ(expect_cuda_matches_cpu(def, axes, 6, {{"*", kRope}}), "cuda:rope");
  // The pairing matters: on the same inputs the NeoX and GPT-J outputs differ.
  const MaterializedInputs in = synthesize(def, axes, 6);
  const reference::Arguments args{in.tensors, in.scalars};
  cuda::Stream stream;
  const auto a = reference_cuda::run_on_host_arguments(def, axes, args, stream.get());
  const auto b = reference_cuda::run_on_host_arguments(neox, axes, args, stream.get());
  EXPECT_FALSE(tensors_close(a.at("q_out"), b.at("q_out"), 1e-3, 1e-2));
}

// Shapes and dtypes on both sides of the vectorized kernel's conditions (2-byte q/k, an fp32
// cache, head_size a multiple of 8, rotary_dim a multiple of 16 for NeoX and of 8 for GPT-J):
// each one agrees with the CPU element for element.
TEST(CudaReferenceRope, VectorizedAndGenericShapesAgreeWithTheCpu) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition neox =
      corpus_definition(corpus, "rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
  struct Case {
    std::int64_t head, rot;
    const char* dtype;
    bool interleaved;
  };
  for (const Case& c : {Case{40, 24, "bfloat16", false},   // rot/2 = 12: the generic kernel
                        Case{40, 24, "bfloat16", true},    // GPT-J groups of 8: vectorized
                        Case{128, 64, "float16", false},   // vectorized, fp16
                        Case{128, 64, "float32", false},   // generic
                        Case{36, 32, "bfloat16", false},   // head not whole groups: generic
                        Case{64, 64, "float16", true}}) {  // no pass-through part: vectorized
    const Definition def = variant(neox, c.head, c.rot, c.dtype, c.interleaved);
    const std::uint64_t seed = static_cast<std::uint64_t>(c.head + c.rot);
    EXPECT_EQ(expect_cuda_matches_cpu(def, rope_axes(29, 6, 2, 300), seed, {{"*", kRope}}),
              "cuda:rope")
        << c.head << " " << c.rot << " " << c.dtype << " " << c.interleaved;
  }
}

// Positions count from the end of the cache when negative, as Python indexing does.
TEST(CudaReferenceRope, NegativePositions) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
  const AxisValues axes = rope_axes(6, 2, 1, 100);
  MaterializedInputs in = synthesize(def, axes, 7);
  Tensor& pos = in.tensors.at("positions");
  const std::int64_t values[] = {-1, -100, 0, 99, -37, 5};
  for (int t = 0; t < 6; ++t) pos.set(t, static_cast<double>(values[t]));
  const reference::Arguments args{in.tensors, in.scalars};
  const auto cpu = reference::run(def, axes, args);
  cuda::Stream stream;
  const auto gpu = reference_cuda::run_on_host_arguments(def, axes, args, stream.get());
  for (const char* name : {"q_out", "k_out"})
    EXPECT_TRUE(tensors_close(gpu.at(name), cpu.at(name), kRope.atol, kRope.rtol)) << name;
}

// A position outside the cache: the CPU reference throws; the CUDA kernel cannot, and marks
// exactly that token's outputs NaN while the other tokens are right.
void expect_nan_for_the_token_outside_the_cache(const Definition& def) {
  const AxisValues axes = rope_axes(3, 2, 1, 16);
  MaterializedInputs in = synthesize(def, axes, 8);
  const reference::Arguments good{in.tensors, in.scalars};
  const auto cpu = reference::run(def, axes, good);
  in.tensors.at("positions").set(1, 16.0);
  const reference::Arguments bad{in.tensors, in.scalars};
  EXPECT_THROW(reference::run(def, axes, bad), Error);
  cuda::Stream stream;
  const auto gpu = reference_cuda::run_on_host_arguments(def, axes, bad, stream.get());
  for (const char* name : {"q_out", "k_out"}) {
    const Tensor& g = gpu.at(name);
    const Tensor& c = cpu.at(name);
    const std::int64_t row = g.numel() / 3;  // heads * head_size per token
    for (std::int64_t i = 0; i < g.numel(); ++i) {
      if (i / row == 1) {
        EXPECT_TRUE(std::isnan(g.get(i))) << name << " " << i;
      } else {
        EXPECT_NEAR(g.get(i), c.get(i), kRope.atol + kRope.rtol * std::fabs(c.get(i)))
            << name << " " << i;
      }
    }
  }
}

TEST(CudaReferenceRope, PositionOutsideTheCacheIsNaN) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition neox =
      corpus_definition(corpus, "rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
  // The corpus shape takes the vectorized kernel, rotary_dim 24 the generic one.
  {
    SCOPED_TRACE("rotary_dim 64");
    expect_nan_for_the_token_outside_the_cache(neox);
  }
  SCOPED_TRACE("rotary_dim 24");
  expect_nan_for_the_token_outside_the_cache(variant(neox, 40, 24, "bfloat16", false));
}

// The largest shape a prefill gives (16k tokens, 64 q heads, 8 kv heads): well under a second.
TEST(CudaReferenceRope, LargePrefillIsFast) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def =
      corpus_definition(corpus, "rope", "rope_with_cos_sin_cache_neox_style_d128_rd64");
  const AxisValues axes = rope_axes(16384, 64, 8, 32768);
  const MaterializedInputs in = synthesize(def, axes, 9);
  cuda::Stream stream;
  reference_cuda::DeviceArguments dargs;
  for (const auto& [name, t] : in.tensors)
    dargs.tensors.emplace(name, cuda::to_device(t, stream.get()));
  const auto warm = reference_cuda::run(def, axes, dargs, stream.get());
  stream.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = reference_cuda::run(def, axes, dargs, stream.get());
  stream.synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  [rope 16384 tokens x (64 + 8) heads: %.2f ms]\n", seconds * 1e3);
  EXPECT_LT(seconds, 1.0);
  // Spot check against the CPU on the first 64 tokens (each token depends only on itself).
  const AxisValues small = rope_axes(64, 64, 8, 32768);
  reference::Arguments head;
  for (const auto& [name, t] : in.tensors) {
    if (name == "cos_sin_cache") {
      head.tensors.emplace(name, t);
      continue;
    }
    Shape s = t.shape();
    s[0] = 64;
    Tensor part(t.dtype(), s);
    std::memcpy(part.raw(), t.raw(), part.nbytes());  // the first 64 tokens' elements
    head.tensors.emplace(name, part);
  }
  const auto cpu = reference::run(def, small, head);
  for (const char* name : {"q_out", "k_out"}) {
    const Tensor g = cuda::to_host(out.at(name), stream.get());
    const Tensor& c = cpu.at(name);
    for (std::int64_t i = 0; i < c.numel(); ++i) {
      ASSERT_NEAR(g.get(i), c.get(i), kRope.atol + kRope.rtol * std::fabs(c.get(i)))
          << name << " " << i;
    }
  }
}

}  // namespace
}  // namespace fib::testing
