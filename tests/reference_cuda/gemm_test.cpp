// CUDA gemm (cuBLAS, fp32 accumulation) against the CPU reference: every corpus definition (N
// capped where it is large, K always real), one definition at its real size, the other dtype
// paths (fp32 operands in true fp32, bf16, mixed/float8 operands converted to fp32), M = 0 and
// 1, concurrent calls from several threads and streams, and the largest corpus workload timed.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "fib/tensor/numeric.h"
#include "reference_cuda/parity_util.h"

namespace fib::testing {
namespace {

// fp16 outputs (the corpus): both sides sum K products in fp32 (the CPU serially, cuBLAS in
// tensor-core blocks) and round once. Inputs are N(0, 1), so |C| ~ sqrt(K) <= 150 and the two
// fp32 sums differ by ~sqrt(K) * 2^-24 * |C| ~ 1e-4 typically (1e-3 at most seen in such
// comparisons); the final rounding can then move a value by one fp16 ulp (<= 2^-10 relative,
// 9.8e-4): rtol 2e-3 is two ulps, atol covers values that round near zero.
constexpr ParityTolerance kFp16{1e-2, 2e-3};
// bf16 outputs: one bf16 ulp is <= 2^-7 relative (7.8e-3).
constexpr ParityTolerance kBf16{1e-2, 1e-2};
// fp32 outputs (pedantic fp32 products and sums): only the summation order differs, ~1e-4
// absolute for K = 2048 sums of magnitude ~45.
constexpr ParityTolerance kFp32{2e-3, 1e-4};

Definition with_dtypes(const Definition& def, DType a, DType b, DType c) {
  return edited_definition(def, [&](Json& j) {
    j["name"] = def.name + "_" + std::string(dtype_name(a)) + "_" + std::string(dtype_name(b)) +
                "_" + std::string(dtype_name(c));
    j["inputs"]["A"]["dtype"] = std::string(dtype_name(a));
    j["inputs"]["B"]["dtype"] = std::string(dtype_name(b));
    j["outputs"]["C"]["dtype"] = std::string(dtype_name(c));
  });
}

TEST(CudaReferenceGemm, EveryCorpusGemmMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  const auto corpus = corpus_dir();
  if (!corpus) GTEST_SKIP() << "needs ../shared/corpus";
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(*corpus / "definitions" / "gemm")) {
    const Definition full = load_definition(e.path().string());
    // K (the length of every sum) stays real; N above 2048 becomes 1000 (not a multiple of any
    // tile) so synthesizing B stays cheap. M = 1 (a single row) and 33.
    const std::int64_t n = *full.axis("N")->value;
    const Definition def = n > 2048 ? scaled_definition(full, {{"N", 1000}}) : full;
    for (std::int64_t m : {1, 33}) {
      const std::string id = expect_cuda_matches_cpu(
          def, {{"M", m}}, 100 + static_cast<std::uint64_t>(m + checked), {{"*", kFp16}});
      EXPECT_EQ(id, "cuda:gemm") << def.name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 24);
}

TEST(CudaReferenceGemm, RealSizeDefinitionAndEmptyM) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(corpus, "gemm", "gemm_n28672_k4096");
  expect_cuda_matches_cpu(def, {{"M", 5}}, 3, {{"*", kFp16}});
  // M = 0: an empty product (no cuBLAS call), an empty output of the right shape.
  expect_cuda_matches_cpu(def, {{"M", 0}}, 4, {{"*", kFp16}});
}

TEST(CudaReferenceGemm, OtherDtypePaths) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition base = corpus_definition(corpus, "gemm", "gemm_n128_k2048");
  struct Case {
    DType a, b, c;
    ParityTolerance tol;
  };
  const Case cases[] = {
      {DType::kFloat32, DType::kFloat32, DType::kFloat32, kFp32},        // cuBLAS fp32, pedantic
      {DType::kBFloat16, DType::kBFloat16, DType::kBFloat16, kBf16},     // cuBLAS bf16 -> bf16
      {DType::kFloat32, DType::kFloat32, DType::kFloat16, kFp16},        // fp32 product, rounded
      {DType::kFloat8E4M3FN, DType::kFloat16, DType::kBFloat16, kBf16},  // converted operands
  };
  for (const Case& c : cases) {
    const Definition def = with_dtypes(base, c.a, c.b, c.c);
    EXPECT_EQ(expect_cuda_matches_cpu(def, {{"M", 19}}, 8, {{"*", c.tol}}), "cuda:gemm");
  }
}

// Four threads, each with its own stream (so its own cached cuBLAS handle) and two share one
// stream's handle, all at once: every result matches the CPU's.
TEST(CudaReferenceGemm, ConcurrentCallsFromSeveralThreads) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(corpus, "gemm", "gemm_n2048_k4096");
  const AxisValues axes = {{"M", 64}};
  Workload w;
  w.uuid = "concurrent";
  w.axes = axes;
  MaterializeOptions opts;
  opts.seed = 21;
  const MaterializedInputs in = materialize_inputs(def, w, opts);
  const reference::Arguments args{in.tensors, in.scalars};
  const Tensor expected = reference::run(def, axes, args).at("C");
  cuda::Stream shared;
  std::vector<Tensor> got(6);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      cuda::Stream own;
      const cudaStream_t s = i < 2 ? shared.get() : own.get();
      for (int rep = 0; rep < 3; ++rep)
        got[i] = reference_cuda::run_on_host_arguments(def, axes, args, s).at("C");
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(tensors_close(got[i], expected, kFp16.atol, kFp16.rtol)) << "thread " << i;
}

// The largest corpus workload (gemm_n28672_k4096 at M = 8192: 1.9 TFLOP) well under a second;
// sampled entries checked against double-precision dot products.
TEST(CudaReferenceGemm, LargestCorpusWorkloadIsFast) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = corpus_definition(corpus, "gemm", "gemm_n28672_k4096");
  const std::int64_t m = 8192, n = 28672, k = 4096;
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  auto uniform = [&state] {  // xorshift64*, in [-1, 1)
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    return static_cast<float>(static_cast<double>((state * 0x2545F4914F6CDD1Dull) >> 40) * 0x1p-23 -
                              1.0);
  };
  Tensor a(DType::kFloat16, {m, k}), b(DType::kFloat16, {n, k});
  for (Tensor* t : {&a, &b}) {
    std::uint16_t* p = t->data<std::uint16_t>();
    for (std::int64_t i = 0; i < t->numel(); ++i) p[i] = numeric::float_to_fp16(uniform());
  }
  cuda::Stream stream;
  reference_cuda::DeviceArguments dargs;
  dargs.tensors.emplace("A", cuda::to_device(a, stream.get()));
  dargs.tensors.emplace("B", cuda::to_device(b, stream.get()));
  const AxisValues axes = {{"M", m}};
  const auto warm = reference_cuda::run(def, axes, dargs, stream.get());  // cuBLAS handle, kernels
  stream.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = reference_cuda::run(def, axes, dargs, stream.get());
  stream.synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  [gemm M=%ld N=%ld K=%ld: %.1f ms]\n", static_cast<long>(m), static_cast<long>(n),
              static_cast<long>(k), seconds * 1e3);
  EXPECT_LT(seconds, 1.0);
  const Tensor c = cuda::to_host(out.at("C"), stream.get());
  const std::uint16_t* ap = a.data<std::uint16_t>();
  const std::uint16_t* bp = b.data<std::uint16_t>();
  for (int s = 0; s < 64; ++s) {
    const std::int64_t i = (s * 7919) % m, j = (s * 104729) % n;
    double ref = 0;
    for (std::int64_t p = 0; p < k; ++p) {
      ref += static_cast<double>(numeric::fp16_to_float(ap[i * k + p])) *
             static_cast<double>(numeric::fp16_to_float(bp[j * k + p]));
    }
    // |C| ~ sqrt(K / 9) ~ 21: fp32 summation error ~1e-5, then the fp16 rounding.
    EXPECT_NEAR(c.get(i * n + j), ref, 1e-2 + 1e-3 * std::fabs(ref)) << i << ", " << j;
  }
}

}  // namespace
}  // namespace fib::testing
