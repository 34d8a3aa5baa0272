// activation reference (act(gate) * up, the gate half first): golden values by hand on a tiny
// input, the function read from the reference text, and what it declines.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fib/reference/reference.h"
#include "reference_test_util.h"

namespace fib::testing {
namespace {

// A [num_tokens, 4] -> [num_tokens, 2] definition named `name` whose reference applies `act`.
Definition act_definition(const std::string& name, const std::string& act,
                          const std::string& out_dtype = "bfloat16") {
  const std::string text = R"({"name": ")" + name + R"(", "op_type": "activation",
    "axes": {"num_tokens": {"type": "var"}, "hidden_size": {"type": "const", "value": 4},
             "hidden_div_2": {"type": "const", "value": 2}},
    "constraints": ["hidden_size == 2 * hidden_div_2"],
    "inputs": {"input": {"shape": ["num_tokens", "hidden_size"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["num_tokens", "hidden_div_2"], "dtype": ")" +
                           out_dtype + R"("}},
    "reference": "import torch\nimport torch.nn.functional as F\n\ndef run(input):\n    x = input.float()\n    return ()" +
                           act + R"((x[:, :2]) * x[:, 2:]).to(input.dtype)\n"})";
  Diagnostics diag;
  ReadContext ctx{name, &diag};
  auto d = definition_from_json(Json::parse(text), ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

// Two tokens: gates (1, -2) with ups (3, 0.5), and gates (0.25, 0) with ups (-4, 7); every value
// exact in bfloat16.
reference::Outputs run_on_two_tokens(const Definition& def) {
  Tensor in(DType::kBFloat16, {2, 4});
  const double v[] = {1, -2, 3, 0.5, 0.25, 0, -4, 7};
  for (int i = 0; i < 8; ++i) in.set(i, v[i]);
  reference::Arguments args;
  args.tensors.emplace("input", in);
  return reference::run(def, {{"num_tokens", 2}}, args);
}

TEST(ActivationReference, SiluAndMulHandComputedValues) {
  const auto out = run_on_two_tokens(act_definition("silu_and_mul_h4", "F.silu")).at("output");
  ASSERT_EQ(out.shape(), (Shape{2, 2}));
  // silu(1) * 3 = 2.19318 -> 2.1875 in bf16; silu(-2) * 0.5 = -0.119203 -> -0.119140625;
  // silu(0.25) * -4 = -0.562177 -> -0.5625; silu(0) * 7 = 0.
  EXPECT_EQ(out.get(0), 2.1875);
  EXPECT_EQ(out.get(1), -0.119140625);
  EXPECT_EQ(out.get(2), -0.5625);
  EXPECT_EQ(out.get(3), 0.0);
}

TEST(ActivationReference, ExactAndTanhGeluAreTold) {
  // fp32 outputs keep the two GELUs apart: gelu(-2) * 0.5 = -0.0227501 (erf) against
  // -0.0227012 (tanh), gelu(0.25) * -4 = -0.598706 against -0.598701.
  const auto exact =
      run_on_two_tokens(act_definition("gelu_and_mul_h4", "F.gelu", "float32")).at("output");
  EXPECT_NEAR(exact.get(0), 2.5240342, 1e-6);
  EXPECT_NEAR(exact.get(1), -0.0227501319, 1e-8);
  EXPECT_NEAR(exact.get(2), -0.5987063, 1e-6);
  const auto tanh =
      run_on_two_tokens(act_definition("gelu_tanh_and_mul_h4",
                                       "(lambda g: F.gelu(g, approximate='tanh'))", "float32"))
          .at("output");
  EXPECT_NEAR(tanh.get(0), 2.5235760, 1e-6);
  EXPECT_NEAR(tanh.get(1), -0.0227011530, 1e-8);
  EXPECT_NEAR(tanh.get(2), -0.5987014, 1e-6);
}

TEST(ActivationReference, AReferenceThatNamesNoKnownFunctionIsDeclined) {
  // g * torch.sigmoid(g) is silu, but spelled so that only PyTorch can tell.
  const Definition def = act_definition("silu_and_mul_h4", "(lambda g: g * torch.sigmoid(g))");
  std::string why;
  EXPECT_EQ(reference::find_kernel(def, &why), nullptr);
  EXPECT_THAT(why, ::testing::HasSubstr("the reference names no activation it knows"));
}

TEST(ActivationReference, RefusesAnInterfaceWithoutTheHalfWidthOutput) {
  const Definition def =
      edited_definition(act_definition("silu_and_mul_h4", "F.silu"), [](Json& j) {
        j["axes"].erase("hidden_div_2");
        j.erase("constraints");
        j["outputs"]["output"]["shape"] = Json::array({"num_tokens", "hidden_size"});
      });
  std::string why;
  EXPECT_EQ(reference::find_kernel(def, &why), nullptr);
  EXPECT_THAT(why, ::testing::HasSubstr("hidden_size == 2 * hidden_div_2"));
}

}  // namespace
}  // namespace fib::testing
