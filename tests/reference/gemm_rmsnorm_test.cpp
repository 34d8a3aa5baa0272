// gemm and rmsnorm references: golden values by hand, and parity with the corpus's PyTorch
// references on seeded random inputs.
#include <gtest/gtest.h>

#include "fib/reference/reference.h"
#include "python_reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

Definition gemm_definition(int n, int k) {
  Diagnostics diag;
  ReadContext ctx{"test", &diag};
  const std::string text = R"({"name": "gemm_t", "op_type": "gemm", "axes": {"M": {"type": "var"},
    "N": {"type": "const", "value": )" +
                           std::to_string(n) + R"(}, "K": {"type": "const", "value": )" +
                           std::to_string(k) + R"(}},
    "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16"}, "B": {"shape": ["N", "K"], "dtype": "float16"}},
    "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
    "reference": "import torch\n\ndef run(A, B):\n    return torch.matmul(A, B.T)\n"})";
  auto d = definition_from_json(Json::parse(text), ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

TEST(GemmReference, HandComputedValues) {
  const Definition def = gemm_definition(2, 3);
  reference::Arguments args;
  Tensor a(DType::kFloat16, {1, 3}), b(DType::kFloat16, {2, 3});
  const double av[] = {1, 2, 3}, bv[] = {1, 0, -1, 0.5, 0.5, 0.5};
  for (int i = 0; i < 3; ++i) a.set(i, av[i]);
  for (int i = 0; i < 6; ++i) b.set(i, bv[i]);
  args.tensors.emplace("A", a);
  args.tensors.emplace("B", b);
  const auto out = reference::run(def, {{"M", 1}}, args);
  const Tensor& c = out.at("C");
  EXPECT_EQ(c.shape(), (Shape{1, 2}));
  EXPECT_EQ(c.get(0), -2.0);
  EXPECT_EQ(c.get(1), 3.0);
}

TEST(GemmReference, RejectsAWrongInputShape) {
  const Definition def = gemm_definition(2, 3);
  reference::Arguments args;
  args.tensors.emplace("A", Tensor(DType::kFloat16, {1, 4}));
  args.tensors.emplace("B", Tensor(DType::kFloat16, {2, 3}));
  try {
    reference::run(def, {{"M", 1}}, args);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "gemm_t: error: input 'A' has shape [1, 4], the axes give [1, 3]");
  }
}

TEST(GemmReference, MatchesPyTorchOnCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  const Definition def = corpus_definition(corpus, "gemm", "gemm_n128_k2048");
  std::mt19937_64 rng(1);
  for (std::int64_t m : {1, 7, 33}) {
    reference::Arguments args;
    args.tensors.emplace("A", random_tensor(DType::kFloat16, {m, 2048}, rng));
    args.tensors.emplace("B", random_tensor(DType::kFloat16, {128, 2048}, rng));
    const auto native = reference::run(def, {{"M", m}}, args);
    const auto torch = run_python_reference(def, args);
    // fp16 output of a 2048-term fp32 dot product: at most one fp16 ulp apart.
    EXPECT_TRUE(tensors_close(native.at("C"), torch.at("C"), 1e-2, 1e-3)) << "M=" << m;
  }
}

TEST(RmsNormReference, ReadsEpsilonFromTheReference) {
  FIB_REQUIRE_CORPUS(corpus);
  const Definition d5 = corpus_definition(corpus, "rmsnorm", "rmsnorm_h4096");
  const Definition d6 = corpus_definition(corpus, "rmsnorm", "rmsnorm_h2048");
  EXPECT_EQ(reference::reference_constants(d5).at("EPS"), 1e-5);
  EXPECT_EQ(reference::reference_constants(d6).at("EPS"), 1e-6);
}

TEST(RmsNormReference, MatchesPyTorchOnEveryCorpusDefinition) {
  FIB_REQUIRE_CORPUS(corpus);
  FIB_REQUIRE_TORCH(python);
  std::mt19937_64 rng(2);
  struct Case {
    Definition def;
    reference::Outputs native;
    std::size_t job;
  };
  std::vector<Case> cases;
  PythonReferenceBatch batch;
  for (const auto& e : std::filesystem::directory_iterator(corpus / "definitions/rmsnorm")) {
    const Definition def = load_definition(e.path().string());
    const std::int64_t h = def.axis("hidden_size")->value.value();
    for (std::int64_t rows : {1, 5}) {
      reference::Arguments args;
      args.tensors.emplace("hidden_states", random_tensor(DType::kBFloat16, {rows, h}, rng, -3, 3));
      if (def.input("residual"))
        args.tensors.emplace("residual", random_tensor(DType::kBFloat16, {rows, h}, rng, -3, 3));
      args.tensors.emplace("weight", random_tensor(DType::kBFloat16, {h}, rng, 0.5, 1.5));
      cases.push_back(
          {def, reference::run(def, {{"batch_size", rows}}, args), batch.add(def, args)});
    }
  }
  batch.run();
  for (const auto& c : cases) {
    // Both compute in fp32 and round once to bf16; summation order may flip one rounding.
    EXPECT_TRUE(tensors_close(c.native.at("output"), batch.outputs(c.job).at("output"), 1e-2, 8e-3))
        << c.def.name;
  }
  EXPECT_EQ(cases.size(), 26u);
}

}  // namespace
}  // namespace fib::testing
