// Top-k / top-p renormalization and min-p sampling on hand-computed rows: the renorm kernels
// return the masked, renormalized distribution; min-p keeps the tokens at least min_p times the
// row's maximum (the cut inclusive), and its draws stay inside that support.
#include <gtest/gtest.h>

#include "fib/reference/reference.h"
#include "fib/reference/sampling.h"
#include "fib/trace/json_reader.h"

namespace fib::testing {
namespace {

Definition sampling_def(const std::string& param, const std::string& dtype,
                        const std::string& output, const std::string& out_shape,
                        const std::string& out_dtype) {
  Diagnostics diag;
  ReadContext ctx{"test", &diag};
  const std::string text = R"({"name": "t", "op_type": "sampling",
    "axes": {"batch_size": {"type": "var"}, "vocab_size": {"type": "const", "value": 4}},
    "inputs": {"probs": {"shape": ["batch_size", "vocab_size"], "dtype": "float32"},
               ")" + param +
                           R"(": {"shape": ["batch_size"], "dtype": ")" + dtype + R"("}},
    "outputs": {")" + output +
                           R"(": {"shape": )" + out_shape + R"(, "dtype": ")" + out_dtype +
                           R"("}},
    "reference": "def run(probs, )" +
                           param + R"():\n    pass\n"})";
  auto d = definition_from_json(Json::parse(text), ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

reference::Arguments row_args(const std::string& param, double value, DType dtype) {
  reference::Arguments args;
  Tensor p(DType::kFloat32, {1, 4});
  const double v[] = {0.1, 0.4, 0.2, 0.3};
  for (int i = 0; i < 4; ++i) p.set(i, v[i]);
  Tensor x(dtype, {1});
  x.set(0, value);
  args.tensors.emplace("probs", p);
  args.tensors.emplace(param, x);
  return args;
}

TEST(SamplingRenormReference, TopKAndTopPRenormalizeTheKeptTokens) {
  const auto renorm = [](const std::string& param, const std::string& dtype) {
    return sampling_def(param, dtype, "renormalized", R"(["batch_size", "vocab_size"])", "float32");
  };
  // Top 2 of {.1, .4, .2, .3}: .4 and .3 -> 4/7, 3/7.
  auto out = reference::run(renorm("top_k", "int32"), {{"batch_size", 1}},
                            row_args("top_k", 2, DType::kInt32));
  const double k2[] = {0, 4.0 / 7, 0, 3.0 / 7};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out.at("renormalized").get(i), k2[i], 1e-6) << i;
  // top_p 0.6: .4 (mass before 0) and .3 (mass before .4 <= .6) kept; .2 has .7 before it.
  out = reference::run(renorm("top_p", "float32"), {{"batch_size", 1}},
                       row_args("top_p", 0.6, DType::kFloat32));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out.at("renormalized").get(i), k2[i], 1e-6) << i;
}

TEST(SamplingRenormReference, MinPKeepsTokensAtLeastMinPTimesTheMaximum) {
  const Definition def = sampling_def("min_p", "float32", "samples", R"(["batch_size"])", "int64");
  // min_p 0.5 of max .4: the cut is .2, kept inclusive: .4, .2, .3 -> 4/9, 2/9, 3/9.
  const reference::Arguments args = row_args("min_p", 0.5, DType::kFloat32);
  const Tensor d = reference::sampling_distribution(def, args);
  const double want[] = {0, 4.0 / 9, 2.0 / 9, 3.0 / 9};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(d.get(i), want[i], 1e-6) << i;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const auto out = reference::run(def, {{"batch_size", 1}}, args, 1, seed);
    EXPECT_NE(out.at("samples").get(0), 0) << "seed " << seed;
  }
}

}  // namespace
}  // namespace fib::testing
