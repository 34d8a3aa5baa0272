// concat_mla (concat_mla_absorb_q) and hadamard (hadamard_transform) references: golden values by
// hand on tiny inputs, and what they decline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fib/reference/reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

Definition parse(const std::string& text) {
  Diagnostics diag;
  ReadContext ctx{"test", &diag};
  auto d = definition_from_json(Json::parse(text), ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

TEST(ConcatMlaReference, PutsTheLatentPartBeforeTheRotaryPart) {
  const Definition def = parse(R"({"name": "concat_mla_absorb_q_h2_ckv3_kpe1",
    "op_type": "concat_mla",
    "axes": {"num_tokens": {"type": "var"}, "num_heads": {"type": "const", "value": 2},
             "ckv_dim": {"type": "const", "value": 3}, "kpe_dim": {"type": "const", "value": 1},
             "q_dim": {"type": "const", "value": 4}},
    "inputs": {"q_nope": {"shape": ["num_tokens", "num_heads", "ckv_dim"], "dtype": "bfloat16"},
               "q_pe": {"shape": ["num_tokens", "num_heads", "kpe_dim"], "dtype": "bfloat16"}},
    "outputs": {"q": {"shape": ["num_tokens", "num_heads", "q_dim"], "dtype": "bfloat16"}},
    "reference": "import torch\n\ndef run(q_nope, q_pe):\n    return torch.cat([q_nope, q_pe], dim=-1)\n"})");
  Tensor nope(DType::kBFloat16, {1, 2, 3}), pe(DType::kBFloat16, {1, 2, 1});
  for (int i = 0; i < 6; ++i) nope.set(i, i + 1);  // head 0: 1 2 3, head 1: 4 5 6
  pe.set(0, -1);
  pe.set(1, -2);
  reference::Arguments args;
  args.tensors.emplace("q_nope", nope);
  args.tensors.emplace("q_pe", pe);
  const auto out = reference::run(def, {{"num_tokens", 1}}, args);
  const Tensor& q = out.at("q");
  ASSERT_EQ(q.shape(), (Shape{1, 2, 4}));
  const double want[] = {1, 2, 3, -1, 4, 5, 6, -2};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q.get(i), want[i]) << i;
}

Definition hadamard_definition(const std::string& scale_line) {
  return parse(R"({"name": "hadamard_transform_d4", "op_type": "hadamard",
    "axes": {"num_tokens": {"type": "var"}, "dim": {"type": "const", "value": 4}},
    "inputs": {"x": {"shape": ["num_tokens", "dim"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["num_tokens", "dim"], "dtype": "bfloat16"}},
    "reference": "import torch\n\ndef run(x):\n    )" +
               scale_line + R"(\n    return x\n"})");
}

TEST(HadamardReference, SylvesterOrderAndTheScale) {
  // H4 rows: (1 1 1 1), (1 -1 1 -1), (1 1 -1 -1), (1 -1 -1 1); x = (1, 2, 3, 4) gives
  // (10, -2, -4, 0), times 0.5; a unit vector gives H's row, times 0.5.
  Tensor x(DType::kBFloat16, {2, 4});
  const double v[] = {1, 2, 3, 4, 0, 1, 0, 0};
  for (int i = 0; i < 8; ++i) x.set(i, v[i]);
  reference::Arguments args;
  args.tensors.emplace("x", x);
  const auto out = reference::run(hadamard_definition("SCALE = 0.5"), {{"num_tokens", 2}}, args);
  const Tensor& o = out.at("output");
  const double want[] = {5, -1, -2, 0, 0.5, -0.5, 0.5, -0.5};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(o.get(i), want[i]) << i;
}

TEST(HadamardReference, AReferenceWithoutAScaleIsDeclined) {
  std::string why;
  EXPECT_EQ(reference::find_kernel(hadamard_definition("pass"), &why), nullptr);
  EXPECT_THAT(why, ::testing::HasSubstr("the reference fixes no scale (SCALE = ...)"));
}

}  // namespace
}  // namespace fib::testing
