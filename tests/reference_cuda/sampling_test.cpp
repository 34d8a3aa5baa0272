// CUDA sampling (top_k, top_p, top_k_top_p) against the CPU reference: on every corpus
// definition at its real vocabulary the GPU distribution (reference_cuda::sampling_distribution)
// equals the CPU's (reference::sampling_distribution) within 1e-6 per entry and the seeded
// samples equal the CPU's and lie in the support; hand-built rows for the rules' edges (ties at
// the cuts, a cdf reaching p exactly, p <= 0, k outside (0, vocab), vocab 1, a batch of 1);
// rows the CPU rejects; a chi-square test of many seeded draws against the distribution; and
// the largest vocabulary at a large batch, timed.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "fib/reference/sampling.h"
#include "reference_cuda/parity_util.h"

namespace fib::testing {
namespace {

// Per-entry tolerance of the distribution (the brief's; the two are expected bit-identical:
// every sum is taken in double in the CPU's order and every division is IEEE).
constexpr double kDistTol = 1e-6;

Definition small_vocab(const std::filesystem::path& corpus, const std::string& kind,
                       std::int64_t vocab) {
  return scaled_definition(
      corpus_definition(corpus, "sampling", kind + "_sampling_from_probs_v128256"),
      {{"vocab_size", vocab}});
}

reference::Arguments rows(const Definition& def, std::int64_t vocab,
                          const std::vector<std::vector<double>>& probs,
                          const std::vector<double>& top_k, const std::vector<double>& top_p) {
  reference::Arguments args;
  const auto b = static_cast<std::int64_t>(probs.size());
  Tensor p(DType::kFloat32, {b, vocab});
  for (std::int64_t r = 0; r < b; ++r) {
    for (std::int64_t i = 0; i < vocab; ++i)
      p.set(r * vocab + i, probs[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]);
  }
  args.tensors.emplace("probs", p);
  if (def.input("top_k")) {
    Tensor k(def.input("top_k")->dtype, {b});
    for (std::int64_t r = 0; r < b; ++r) k.set(r, top_k[static_cast<std::size_t>(r)]);
    args.tensors.emplace("top_k", k);
  }
  if (def.input("top_p")) {
    Tensor t(def.input("top_p")->dtype, {b});
    for (std::int64_t r = 0; r < b; ++r) t.set(r, top_p[static_cast<std::size_t>(r)]);
    args.tensors.emplace("top_p", t);
  }
  return args;
}

struct GpuSampling {
  Tensor dist;
  Tensor samples;
};

GpuSampling gpu_sampling(const Definition& def, const reference::Arguments& args,
                         std::uint64_t seed) {
  const AxisValues axes = {{"batch_size", args.tensor("probs").dim(0)}};
  cuda::Stream stream;
  GpuSampling g;
  g.samples =
      reference_cuda::run_on_host_arguments(def, axes, args, stream.get(), seed).at("samples");
  reference_cuda::DeviceArguments dargs;
  for (const auto& [name, t] : args.tensors)
    dargs.tensors.emplace(name, cuda::to_device(t, stream.get()));
  g.dist = cuda::to_host(reference_cuda::sampling_distribution(def, axes, dargs, stream.get()),
                         stream.get());
  return g;
}

// The largest |a - b| (NaN where exactly one side is NaN).
double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double worst = 0;
  for (std::int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return NAN;
      continue;
    }
    worst = std::max(worst, std::fabs(x - y));
  }
  return worst;
}

// GPU against CPU on `args`: distributions within kDistTol, the same samples for `seed`, and
// every sample inside the support.
void expect_matches_cpu(const Definition& def, const reference::Arguments& args, std::uint64_t seed,
                        double* worst = nullptr) {
  const std::int64_t batch = args.tensor("probs").dim(0), vocab = args.tensor("probs").dim(1);
  const Tensor cpu_dist = reference::sampling_distribution(def, args);
  const Tensor cpu_samples =
      reference::run(def, {{"batch_size", batch}}, args, 0, seed).at("samples");
  const GpuSampling g = gpu_sampling(def, args, seed);
  const double diff = max_abs_diff(g.dist, cpu_dist);
  EXPECT_LE(diff, kDistTol) << def.name << " seed " << seed;
  if (worst) *worst = std::max(*worst, diff);
  for (std::int64_t r = 0; r < batch; ++r) {
    const auto s = static_cast<std::int64_t>(g.samples.get(r));
    EXPECT_EQ(s, static_cast<std::int64_t>(cpu_samples.get(r))) << def.name << " row " << r;
    ASSERT_TRUE(s >= 0 && s < vocab) << def.name << " row " << r << " sample " << s;
    EXPECT_GT(cpu_dist.get(r * vocab + s), 0.0) << def.name << " row " << r << ": outside";
  }
}

TEST(CudaReferenceSampling, EveryCorpusDefinitionMatchesTheCpuReference) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  int checked = 0;
  double worst = 0;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions" / "sampling")) {
    const Definition def = load_definition(e.path().string());
    const std::int64_t vocab = *def.axis("vocab_size")->value, batch = 12;
    Workload w;
    w.uuid = "sampling";
    w.axes = {{"batch_size", batch}};
    MaterializeOptions opts;
    opts.seed = 40 + static_cast<std::uint64_t>(checked);
    MaterializedInputs in = materialize_inputs(def, w, opts);
    // Rows 0-5 take every branch (k = 1, 37, vocab, 0, -1, 1000; p = 0, 0.3, 1, 0.9, 0.99,
    // 0.5); rows 6-11 keep the recipe's (k in {1, ..., 1000}, p in [0.5, 0.99]).
    const double ks[] = {1, 37, static_cast<double>(vocab), 0, -1, 1000};
    const double ps[] = {0, 0.3, 1, 0.9, 0.99, 0.5};
    for (int r = 0; r < 6; ++r) {
      if (in.tensors.count("top_k")) in.tensors.at("top_k").set(r, ks[r]);
      if (in.tensors.count("top_p")) in.tensors.at("top_p").set(r, ps[r]);
    }
    const reference::Arguments args{in.tensors, in.scalars};
    for (std::uint64_t seed : {1u, 77u}) expect_matches_cpu(def, args, seed, &worst);
    std::string why;
    const auto* k = reference_cuda::find_kernel(def, &why);
    EXPECT_TRUE(k && k->id() == "cuda:sampling") << why;
    ++checked;
  }
  EXPECT_EQ(checked, 21);
  std::printf("  [largest |GPU - CPU| probability difference: %g]\n", worst);
}

TEST(CudaReferenceSampling, HandBuiltEdgeCases) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const std::vector<double> a = {0.1, 0.3, 0.05, 0.25, 0.2, 0.1, 0, 0};
  const std::vector<double> tie = {0.2, 0.2, 0.2, 0.2, 0.1, 0.1, 0, 0};
  // p reaches the cdf exactly (0.5 + 0.25) without exceeding it; 0 and 3 tie at 1/8.
  const std::vector<double> cdf = {0.125, 0, 0.5, 0.125, 0.25, 0, 0, 0};
  const std::vector<double> flat = {0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125};
  {
    // top_k: a tie at the cut keeps the lower indices; k = 0, vocab and < 0 filter nothing.
    const Definition def = small_vocab(corpus, "top_k", 8);
    const auto args = rows(def, 8, {a, tie, a, a, a, flat}, {3, 2, 0, 8, -1, 5}, {});
    expect_matches_cpu(def, args, 3);
    const Tensor d = gpu_sampling(def, args, 3).dist;
    EXPECT_EQ(d.get(8 + 0), 0.5);  // tie row: tokens 0 and 1
    EXPECT_EQ(d.get(8 + 2), 0.0);
  }
  {
    // top_p: exact cdf hit, p = 0.5, 0.3, p = 0 (argmax; in the flat row the first index), 1.
    const Definition def = small_vocab(corpus, "top_p", 8);
    const auto args = rows(def, 8, {cdf, cdf, cdf, cdf, cdf, flat, tie}, {},
                           {0.75, 0.5, 0.3, 0.0, 1.0, 0.0, 0.5});
    expect_matches_cpu(def, args, 4);
    const Tensor d = gpu_sampling(def, args, 4).dist;
    EXPECT_NEAR(d.get(0), 1.0 / 7, 1e-7);  // row 0 keeps token 0, the first crossing
    EXPECT_EQ(d.get(3), 0.0);              // and not its tie partner 3
    EXPECT_EQ(d.get(5 * 8 + 0), 1.0);      // flat row, p = 0: the first maximal index
  }
  {
    // top_k_top_p: renormalizing after top_k changes which tokens top_p keeps.
    const Definition def = small_vocab(corpus, "top_k_top_p", 8);
    const std::vector<double> b = {0.1, 0.4, 0.2, 0.3, 0, 0, 0, 0};
    expect_matches_cpu(def, rows(def, 8, {b, b, b, tie}, {3, 3, 0, 3}, {0.42, 0.5, 0.5, 0.0}), 5);
    // A batch of one.
    expect_matches_cpu(def, rows(def, 8, {a}, {2}, {0.6}), 6);
  }
  {
    // Vocabulary 1: top_p shifts its mask (the one token stays); top_k_top_p at p >= 1 keeps it.
    const Definition p1 = small_vocab(corpus, "top_p", 1);
    expect_matches_cpu(p1, rows(p1, 1, {{1.0}, {0.5}}, {}, {0.5, 0.2}), 7);
    const Definition kp1 = small_vocab(corpus, "top_k_top_p", 1);
    expect_matches_cpu(kp1, rows(kp1, 1, {{1.0}}, {0}, {1.0}), 8);
  }
}

// top_k_top_p renormalizes before top_p sorts again, and dividing by the kept mass can make two
// different probabilities equal; the reference then orders them by index. The GPU reuses the
// order sorted for top_k (by the old values), so where the top_p cut falls inside such a run it
// must keep the run's lowest indices. Each row has a > b, neighbouring floats that a / s merges
// (s the kept sum in the CPU's order, rounded to float), with b at a lower index than a.
TEST(CudaReferenceSampling, ValuesMergedByRenormalizingAreCutByIndex) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = small_vocab(corpus, "top_k_top_p", 8);
  // A row [b, a (copies times), c, 0...]: the first a (searching down from 4) whose b merges
  // with it. c puts a / s just above 1/16, where a float's step is twice an a step's image, and
  // sorts first; top_p then keeps c and `cut` tokens of the run.
  struct Row {
    std::vector<double> probs;
    double top_p = 0;
  };
  const auto merged_row = [](int copies, double cut) {
    Row row;
    for (float a = 3.999f; a > 3.9f; a = std::nextafter(a, 0.0f)) {
      const float b = std::nextafter(a, 0.0f);
      const float c = 63.5f - static_cast<float>(copies + 1) * 4.0f;
      double sum = static_cast<double>(b);
      for (int i = 0; i < copies; ++i) sum += static_cast<double>(a);
      sum += static_cast<double>(c);
      const auto s = static_cast<float>(sum);
      if (a / s != b / s) continue;
      row.probs.assign(8, 0.0);
      row.probs[0] = static_cast<double>(b);
      for (int i = 0; i < copies; ++i) row.probs[static_cast<std::size_t>(1 + i)] = a;
      row.probs[static_cast<std::size_t>(1 + copies)] = c;
      // The cdf is c / s, then one step of a / s per token of the run.
      row.top_p = static_cast<double>(c / s) + cut * static_cast<double>(a / s);
      return row;
    }
    ADD_FAILURE() << "no merging pair found";
    return row;
  };
  // Row 0 keeps one token of the run {a, b}: b (index 0), though a sorted first before.
  // Row 1 keeps two of {a, a, b}: b and the first a (indices 0 and 1).
  const Row one = merged_row(1, 0.5), two = merged_row(2, 1.5);
  const auto args = rows(def, 8, {one.probs, two.probs}, {3, 4}, {one.top_p, two.top_p});
  expect_matches_cpu(def, args, 11);
  const Tensor d = gpu_sampling(def, args, 11).dist;
  EXPECT_GT(d.get(0), 0.0);
  EXPECT_EQ(d.get(1), 0.0);
  EXPECT_GT(d.get(2), 0.0);
  EXPECT_GT(d.get(8 + 0), 0.0);
  EXPECT_GT(d.get(8 + 1), 0.0);
  EXPECT_EQ(d.get(8 + 2), 0.0);
  EXPECT_GT(d.get(8 + 3), 0.0);
}

// Rows the CPU reference rejects (it throws for the whole call): the GPU gives those rows NaN
// probabilities and sample -1, and the other rows of the batch what the CPU gives them alone.
TEST(CudaReferenceSampling, RejectedRowsAreNaNAndTheOthersUnaffected) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = small_vocab(corpus, "top_k_top_p", 4);
  const std::vector<double> good = {0.1, 0.4, 0.2, 0.3};
  const std::vector<std::vector<double>> probs = {
      good, {0.5, -0.1, 0.3, 0.3}, {0, 0, 0, 0}, {0, 0, 0.5, NAN}, good, {0.2, 0.2, INFINITY, 0}};
  const std::vector<double> ks = {2, 2, 2, 0, 0, 1}, ps = {0.9, 0.9, 0.9, 1.0, 0.5, 0.5};
  const auto args = rows(def, 4, probs, ks, ps);
  // The CPU rejects each bad row (one row a call: with several rows its worker threads would
  // carry the exception).
  for (std::size_t r : {1u, 2u, 3u, 5u}) {
    EXPECT_THROW(reference::sampling_distribution(def, rows(def, 4, {probs[r]}, {ks[r]}, {ps[r]})),
                 Error)
        << "row " << r;
  }
  const GpuSampling g = gpu_sampling(def, args, 9);
  const Tensor cpu =
      reference::sampling_distribution(def, rows(def, 4, {good, good}, {2, 0}, {0.9, 0.5}));
  for (std::int64_t r = 0; r < 6; ++r) {
    const bool ok = r == 0 || r == 4;
    for (std::int64_t i = 0; i < 4; ++i) {
      if (ok) {
        EXPECT_NEAR(g.dist.get(r * 4 + i), cpu.get((r == 0 ? 0 : 1) * 4 + i), kDistTol)
            << r << ", " << i;
      } else {
        EXPECT_TRUE(std::isnan(g.dist.get(r * 4 + i))) << r << ", " << i;
      }
    }
    if (ok) {
      EXPECT_GT(cpu.get((r == 0 ? 0 : 1) * 4 + static_cast<std::int64_t>(g.samples.get(r))), 0.0);
    } else {
      EXPECT_EQ(g.samples.get(r), -1.0) << r;
    }
  }
  // At vocabulary 1 top_k_top_p does not shift its mask: a cdf of 1 > p removes the only token.
  const Definition kp1 = small_vocab(corpus, "top_k_top_p", 1);
  const auto one = rows(kp1, 1, {{1.0}}, {0}, {0.5});
  EXPECT_THROW(reference::sampling_distribution(kp1, one), Error);
  const GpuSampling g1 = gpu_sampling(kp1, one, 1);
  EXPECT_TRUE(std::isnan(g1.dist.get(0)));
  EXPECT_EQ(g1.samples.get(0), -1.0);
}

// Wilson-Hilferty: the chi-square quantile with `df` degrees of freedom at upper tail ~1e-6.
double chi2_critical(int df) {
  const double z = 4.753, a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// 25 seeds x 8192 identical rows = 204,800 draws of a vocab-16 top_k_top_p row: every draw in
// the support, the same draws as the CPU sampler, and Pearson's chi-square against the GPU
// distribution below the 1e-6 quantile (a false failure once in a million runs); against the
// unfiltered row it must be far above it (the test has power).
TEST(CudaReferenceSampling, ManySeededDrawsFollowTheDistribution) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  const std::int64_t vocab = 16, batch = 8192;
  const int seeds = 25;
  const Definition def = small_vocab(corpus, "top_k_top_p", vocab);
  std::vector<double> row(vocab);
  double sum = 0;
  for (std::int64_t i = 0; i < vocab; ++i)
    sum += (row[static_cast<std::size_t>(i)] = static_cast<double>((i * 7) % 16 + 1));
  for (double& x : row) x /= sum;
  const auto args = rows(def, vocab, std::vector<std::vector<double>>(batch, row),
                         std::vector<double>(batch, 10), std::vector<double>(batch, 0.8));
  std::vector<double> count(vocab, 0.0);
  Tensor dist;
  for (int s = 0; s < seeds; ++s) {
    const auto seed = static_cast<std::uint64_t>(1000 + s);
    const GpuSampling g = gpu_sampling(def, args, seed);
    if (s == 0) dist = g.dist;
    const Tensor cpu = reference::run(def, {{"batch_size", batch}}, args, 0, seed).at("samples");
    EXPECT_TRUE(g.samples.same_bytes(cpu)) << "seed " << seed;
    for (std::int64_t r = 0; r < batch; ++r) {
      const auto t = static_cast<std::int64_t>(g.samples.get(r));
      ASSERT_TRUE(t >= 0 && t < vocab);
      ASSERT_GT(dist.get(t), 0.0) << "token " << t << " is outside the support";
      count[static_cast<std::size_t>(t)] += 1;
    }
  }
  const double n = static_cast<double>(batch) * seeds;
  double chi2 = 0, chi2_raw = 0;
  int support = 0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    const double o = count[static_cast<std::size_t>(i)];
    const double p = dist.get(i), q = row[static_cast<std::size_t>(i)];
    if (p > 0) {
      ++support;
      chi2 += (o - n * p) * (o - n * p) / (n * p);
    }
    chi2_raw += (o - n * q) * (o - n * q) / (n * q);
  }
  ASSERT_GE(support, 2);
  const double critical = chi2_critical(support - 1);
  std::printf(
      "  [chi-square %.2f with %d degrees of freedom (1e-6 quantile %.1f); against the "
      "unfiltered row %.0f]\n",
      chi2, support - 1, critical, chi2_raw);
  EXPECT_LT(chi2, critical);
  EXPECT_GT(chi2_raw, 100 * chi2_critical(static_cast<int>(vocab) - 1));
}

// The largest vocabulary (262,208) at batch 512, both filters: well under a second on the GPU,
// and the same distribution and samples as the CPU.
TEST(CudaReferenceSampling, LargestVocabularyAtLargeBatch) {
  FIB_REQUIRE_GPU();
  FIB_REQUIRE_CORPUS(corpus);
  for (const char* name : {"top_p_sampling_from_probs_v262208", "top_k_sampling_from_probs_v262208",
                           "top_k_top_p_sampling_from_probs_v262208"}) {
    const Definition def = corpus_definition(corpus, "sampling", name);
    const std::int64_t batch = 512;
    const AxisValues axes = {{"batch_size", batch}};
    Workload w;
    w.uuid = "large";
    w.axes = axes;
    MaterializeOptions opts;
    opts.seed = 5;
    const MaterializedInputs in = materialize_inputs(def, w, opts);
    const reference::Arguments args{in.tensors, in.scalars};
    cuda::Stream stream;
    reference_cuda::DeviceArguments dargs;
    for (const auto& [n, t] : in.tensors)
      dargs.tensors.emplace(n, cuda::to_device(t, stream.get()));
    const auto warm = reference_cuda::run(def, axes, dargs, stream.get(), 11);
    stream.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = reference_cuda::run(def, axes, dargs, stream.get(), 11);
    stream.synchronize();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("  [%s, batch %ld: %.1f ms]\n", name, static_cast<long>(batch), seconds * 1e3);
    EXPECT_LT(seconds, 1.0) << name;
    const Tensor samples = cuda::to_host(out.at("samples"), stream.get());
    const Tensor cpu_samples = reference::run(def, axes, args, 0, 11).at("samples");
    EXPECT_TRUE(samples.same_bytes(cpu_samples)) << name;
    const Tensor dist = cuda::to_host(
        reference_cuda::sampling_distribution(def, axes, dargs, stream.get()), stream.get());
    EXPECT_LE(max_abs_diff(dist, reference::sampling_distribution(def, args)), kDistTol) << name;
  }
}

}  // namespace
}  // namespace fib::testing
