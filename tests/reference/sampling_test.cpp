// sampling references: hand-computed masks (ties, the first token crossing top_p kept, top_k
// applied before top_p on the renormalized row), the masks against each corpus definition's own
// PyTorch masking code, samples always inside the support, and the empirical distribution of
// many seeded draws against sampling_distribution().
#include "fib/reference/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <regex>

#include "fib/reference/reference.h"
#include "python_reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

Definition small_vocab(const std::filesystem::path& corpus, const std::string& kind,
                       std::int64_t vocab) {
  return scaled_definition(
      corpus_definition(corpus, "sampling", kind + "_sampling_from_probs_v128256"),
      {{"vocab_size", vocab}});
}

reference::Arguments rows(std::int64_t vocab, const std::vector<std::vector<double>>& probs,
                          const std::vector<int>& top_k, const std::vector<double>& top_p) {
  reference::Arguments args;
  const auto b = static_cast<std::int64_t>(probs.size());
  Tensor p(DType::kFloat32, {b, vocab});
  for (std::int64_t r = 0; r < b; ++r) {
    for (std::int64_t i = 0; i < vocab; ++i)
      p.set(r * vocab + i, probs[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]);
  }
  args.tensors.emplace("probs", p);
  if (!top_k.empty()) {
    Tensor k(DType::kInt32, {b});
    for (std::int64_t r = 0; r < b; ++r) k.set(r, top_k[static_cast<std::size_t>(r)]);
    args.tensors.emplace("top_k", k);
  }
  if (!top_p.empty()) {
    Tensor t(DType::kFloat32, {b});
    for (std::int64_t r = 0; r < b; ++r) t.set(r, top_p[static_cast<std::size_t>(r)]);
    args.tensors.emplace("top_p", t);
  }
  return args;
}

void expect_row(const Tensor& dist, std::int64_t r, const std::vector<double>& expected) {
  const std::int64_t vocab = dist.dim(1);
  for (std::int64_t i = 0; i < vocab; ++i) {
    const double e = expected[static_cast<std::size_t>(i)];
    if (e == 0.0) {
      EXPECT_EQ(dist.get(r * vocab + i), 0.0) << "row " << r << " token " << i;
    } else {
      EXPECT_NEAR(dist.get(r * vocab + i), e, 1e-6) << "row " << r << " token " << i;
    }
  }
}

TEST(SamplingReference, TopKHandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = small_vocab(corpus, "top_k", 8);
  const std::vector<double> a = {0.1, 0.3, 0.05, 0.25, 0.2, 0.1, 0, 0};
  const std::vector<double> tie = {0.2, 0.2, 0.2, 0.2, 0.1, 0.1, 0, 0};
  // k = 3; ties at the cut keep the lower indices; k = 0, k = vocab and k < 0 filter nothing.
  const Tensor d =
      reference::sampling_distribution(def, rows(8, {a, tie, a, a, a}, {3, 2, 0, 8, -1}, {}));
  expect_row(d, 0, {0, 0.3 / 0.75, 0, 0.25 / 0.75, 0.2 / 0.75, 0, 0, 0});
  expect_row(d, 1, {0.5, 0.5, 0, 0, 0, 0, 0, 0});
  for (int r = 2; r < 5; ++r) expect_row(d, r, a);
}

TEST(SamplingReference, TopPHandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = small_vocab(corpus, "top_p", 8);
  // Sorted: token 2 (1/2), 4 (1/4), then 0 and 3 tied at 1/8 (0 first); cdf 0.5, 0.75, 0.875, 1.
  const std::vector<double> a = {0.125, 0, 0.5, 0.125, 0.25, 0, 0, 0};
  const Tensor d = reference::sampling_distribution(
      def, rows(8, {a, a, a, a, a}, {}, {0.75, 0.5, 0.3, 0.0, 1.0}));
  // p = 0.75: the cdf reaches p exactly at token 4 without exceeding it, so the next token (0,
  // the first crossing) is still kept; its tie partner 3 is not.
  expect_row(d, 0, {1.0 / 7, 0, 4.0 / 7, 0, 2.0 / 7, 0, 0, 0});
  expect_row(d, 1, {0, 0, 2.0 / 3, 0, 1.0 / 3, 0, 0, 0});  // p = 0.5: 2, then 4 (first crossing)
  expect_row(d, 2, {0, 0, 1, 0, 0, 0, 0, 0});              // p = 0.3: the top token always stays
  expect_row(d, 3, {0, 0, 1, 0, 0, 0, 0, 0});              // p <= 0: argmax
  expect_row(d, 4, a);                                     // p >= 1: no filtering
}

TEST(SamplingReference, TopKTopPHandComputed) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = small_vocab(corpus, "top_k_top_p", 8);
  const std::vector<double> a = {0.1, 0.4, 0.2, 0.3, 0, 0, 0, 0};
  // top_k = 3 keeps 1, 3, 2 renormalized to 4/9, 3/9, 2/9. top_p = 0.42 then applies to that
  // row: 4/9 > 0.42 already, so only token 1 stays (on the raw row, 0.4 < 0.42 would keep 3 too).
  // top_p = 0.5: 4/9, 7/9 -> tokens 1 and 3.
  const Tensor d =
      reference::sampling_distribution(def, rows(8, {a, a, a}, {3, 3, 0}, {0.42, 0.5, 0.5}));
  expect_row(d, 0, {0, 1, 0, 0, 0, 0, 0, 0});
  expect_row(d, 1, {0, 4.0 / 7, 0, 3.0 / 7, 0, 0, 0, 0});
  expect_row(d, 2, {0, 4.0 / 7, 0, 3.0 / 7, 0, 0, 0, 0});  // k = 0: top_p alone (0.4, 0.7)
}

TEST(SamplingReference, RejectsRowsThatAreNotDistributions) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = small_vocab(corpus, "top_k", 4);
  EXPECT_THROW(reference::sampling_distribution(def, rows(4, {{0.5, -0.1, 0.3, 0.3}}, {2}, {})),
               Error);
  EXPECT_THROW(reference::sampling_distribution(def, rows(4, {{0, 0, 0, 0}}, {2}, {})), Error);
  EXPECT_THROW(reference::sampling_distribution(def, rows(4, {{0, 0, 0.5, NAN}}, {0}, {})), Error);
}

TEST(SamplingReference, ABadRowAmongManyThrowsWhicheverThreadMeetsIt) {
  // Rows are split over threads: the error of a row in a later chunk must reach the caller as
  // an exception, not end the process.
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = small_vocab(corpus, "top_k", 4);
  std::vector<std::vector<double>> probs(4096, {0.25, 0.25, 0.25, 0.25});
  probs[4000] = {0.5, -0.1, 0.3, 0.3};
  EXPECT_THROW(reference::sampling_distribution(def, rows(4, probs, std::vector<int>(4096, 2), {})),
               Error);
}

TEST(SamplingReference, SeededSamplerIsDeterministic) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition def = small_vocab(corpus, "top_p", 64);
  std::vector<double> row(64);
  for (int i = 0; i < 64; ++i) row[static_cast<std::size_t>(i)] = 1.0 / 64;
  const reference::Arguments args =
      rows(64, std::vector<std::vector<double>>(32, row), {}, std::vector<double>(32, 1.0));
  const Tensor a = reference::run(def, {{"batch_size", 32}}, args, 0, 5).at("samples");
  const Tensor b =
      reference::run(def, {{"batch_size", 32}}, args, 1, 5).at("samples");  // one thread
  const Tensor c = reference::run(def, {{"batch_size", 32}}, args, 0, 6).at("samples");
  EXPECT_TRUE(a.same_bytes(b));
  EXPECT_FALSE(a.same_bytes(c));
}

// N draws of one row: E[TVD] <= 1/2 sum_i sqrt(p_i / N) <= 1/2 sqrt(m / N) over a support of m
// tokens (Cauchy-Schwarz), 0.0045 for m = 16, N = 200000; one draw moves the TVD by at most
// 1/N, so (McDiarmid) P(TVD > E + 0.0055) <= exp(-2 N 0.0055^2) = 6e-6. Bound: 0.01.
TEST(SamplingReference, EmpiricalDistributionMatchesSamplingDistribution) {
  FIB_REQUIRE_CORPUS(corpus);
  const std::int64_t vocab = 16, batch = 25000, calls = 8;
  std::vector<double> row(vocab);
  for (std::int64_t i = 0; i < vocab; ++i)
    row[static_cast<std::size_t>(i)] = static_cast<double>((i * 7) % 16 + 1);
  const double sum = std::accumulate(row.begin(), row.end(), 0.0);
  for (double& x : row) x /= sum;
  struct Kind {
    const char* name;
    int k;
    double p;
  };
  for (const Kind& kind :
       {Kind{"top_k", 6, 0}, Kind{"top_p", 0, 0.6}, Kind{"top_k_top_p", 10, 0.7}}) {
    const Definition def = small_vocab(corpus, kind.name, vocab);
    const std::vector<std::vector<double>> probs(static_cast<std::size_t>(batch), row);
    const reference::Arguments args = rows(
        vocab, probs,
        kind.k ? std::vector<int>(static_cast<std::size_t>(batch), kind.k) : std::vector<int>{},
        kind.p > 0 ? std::vector<double>(static_cast<std::size_t>(batch), kind.p)
                   : std::vector<double>{});
    const Tensor dist = reference::sampling_distribution(def, args);
    std::vector<double> count(static_cast<std::size_t>(vocab), 0.0);
    for (std::int64_t call = 0; call < calls; ++call) {
      const Tensor s =
          reference::run(def, {{"batch_size", batch}}, args, 0, 100 + call).at("samples");
      for (std::int64_t r = 0; r < batch; ++r) {
        const auto tok = static_cast<std::int64_t>(s.get(r));
        ASSERT_TRUE(tok >= 0 && tok < vocab && dist.get(r * vocab + tok) > 0)
            << kind.name << ": token " << tok;
        count[static_cast<std::size_t>(tok)] += 1;
      }
    }
    const double n = static_cast<double>(batch * calls);
    double tvd = 0, tvd_unfiltered = 0;
    int support = 0;
    for (std::int64_t i = 0; i < vocab; ++i) {
      const double f = count[static_cast<std::size_t>(i)] / n;
      tvd += 0.5 * std::fabs(f - dist.get(i));
      tvd_unfiltered += 0.5 * std::fabs(f - row[static_cast<std::size_t>(i)]);
      support += dist.get(i) > 0;
    }
    EXPECT_LT(tvd, 0.01) << kind.name;
    EXPECT_GT(tvd_unfiltered, 0.1)
        << kind.name << ": the masks must matter for this check to mean anything";
    EXPECT_LT(support, vocab) << kind.name;
    std::printf("  [%s: support %d of %ld, TVD %.4f over %.0f draws]\n", kind.name, support,
                static_cast<long>(vocab), tvd, n);
  }
}

// The definition's own reference with torch.multinomial replaced by the distribution it is
// given (and argmax by its one-hot): its masking code, unchanged, returns what it samples from.
Definition distribution_definition(const Definition& def) {
  Json j = to_json(def);
  j["name"] = def.name + "_distribution";
  j["outputs"] = Json::object();
  j["outputs"]["distribution"] =
      Json{{"shape", Json::array({"batch_size", "vocab_size"})}, {"dtype", "float32"}};
  std::string code = def.reference;
  const std::pair<std::regex, std::string> edits[] = {
      {std::regex(R"((\w+) = torch\.empty\(batch_size, dtype=torch\.int64, device=device\))"),
       "$1 = torch.zeros(batch_size, vocab_size, dtype=torch.float32, device=device)"},
      {std::regex(R"((\w+)\[i\] = torch\.multinomial\(row, 1, replacement=True\)\.squeeze\(0\))"),
       "$1[i] = row / row.sum()"},
      {std::regex(R"((\w+)\[i\] = torch\.argmax\(row\)\.to\(torch\.int64\))"),
       "$1[i] = torch.nn.functional.one_hot(torch.argmax(row), vocab_size).to(torch.float32)"}};
  for (const auto& [re, with] : edits) {
    const bool applies = std::regex_search(code, re);
    EXPECT_TRUE(applies || with.find("one_hot") != std::string::npos)
        << def.name << ": reference changed shape";
    code = std::regex_replace(code, re, with);
  }
  j["reference"] = code;
  Diagnostics diag;
  ReadContext ctx{def.name, &diag};
  auto d = definition_from_json(j, ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

// Every corpus sampling definition at its real vocabulary: five rows covering each branch
// (k = 1, mid, large, = vocab, 0; p = 0, 0.1, 0.5, 0.93, 1). Probabilities are distinct (a
// softmax of a permutation of distinct logits), so no tie sits at a cut.
TEST(SamplingReference, MasksMatchPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(3);
  struct Case {
    Definition def;
    Tensor native;
    reference::Arguments args;
    std::size_t job;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  for (const auto& entry : std::filesystem::directory_iterator(corpus / "definitions/sampling")) {
    const Definition def = load_definition(entry.path().string());
    const std::int64_t vocab = *def.axis("vocab_size")->value, b = 5;
    Tensor probs(DType::kFloat32, {b, vocab});
    std::vector<std::int64_t> perm(static_cast<std::size_t>(vocab));
    for (std::int64_t r = 0; r < b; ++r) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      double z = 0;
      std::vector<double> e(static_cast<std::size_t>(vocab));
      for (std::int64_t i = 0; i < vocab; ++i) {
        e[static_cast<std::size_t>(i)] =
            std::exp(12.0 * static_cast<double>(perm[static_cast<std::size_t>(i)]) /
                     static_cast<double>(vocab));
        z += e[static_cast<std::size_t>(i)];
      }
      for (std::int64_t i = 0; i < vocab; ++i)
        probs.set(r * vocab + i, e[static_cast<std::size_t>(i)] / z);
    }
    reference::Arguments args;
    args.tensors.emplace("probs", probs);
    if (def.input("top_k")) {
      Tensor k(DType::kInt32, {b});
      const std::int64_t kv[] = {1, 37, 5000, vocab, 0};
      for (std::int64_t r = 0; r < b; ++r) k.set(r, static_cast<double>(kv[r]));
      args.tensors.emplace("top_k", k);
    }
    if (def.input("top_p")) {
      Tensor p(DType::kFloat32, {b});
      const double pv[] = {0.0, 0.1, 0.5, 0.93, 1.0};
      for (std::int64_t r = 0; r < b; ++r) p.set(r, pv[r]);
      args.tensors.emplace("top_p", p);
    }
    cases.push_back({def, reference::sampling_distribution(def, args), args,
                     batch.add(distribution_definition(def), args)});
  }
  batch.run();
  for (const auto& c : cases) {
    const Tensor theirs = batch.outputs(c.job).at("distribution");
    const std::int64_t vocab = theirs.dim(1);
    std::int64_t support_mismatch = 0;
    for (std::int64_t i = 0; i < theirs.numel(); ++i)
      support_mismatch += (c.native.get(i) > 0) != (theirs.get(i) > 0);
    EXPECT_EQ(support_mismatch, 0) << c.def.name;
    // Same kept values divided by sums taken in another order: a few float32 ulps.
    const auto close = tensors_close(c.native, theirs, 1e-10, 1e-5);
    EXPECT_TRUE(close) << c.def.name;
    std::printf("  [%s: %s]\n", c.def.name.c_str(), close.message());
    // And the sampler only ever draws inside that support.
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      const Tensor s = reference::run(c.def, {{"batch_size", 5}}, c.args, 0, seed).at("samples");
      for (std::int64_t r = 0; r < 5; ++r) {
        const auto tok = static_cast<std::int64_t>(s.get(r));
        EXPECT_TRUE(tok >= 0 && tok < vocab && theirs.get(r * vocab + tok) > 0)
            << c.def.name << " row " << r;
      }
    }
  }
  EXPECT_EQ(cases.size(), 21u);
}

}  // namespace
}  // namespace fib::testing
