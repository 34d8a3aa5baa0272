// bmm: C[b] = A[b] @ B[b] on hand-computed batches (each batch entry its own product).
#include <gtest/gtest.h>

#include "fib/reference/reference.h"
#include "fib/trace/json_reader.h"

namespace fib::testing {
namespace {

TEST(BmmReference, EachBatchEntryIsItsOwnProduct) {
  Diagnostics diag;
  ReadContext ctx{"test", &diag};
  auto def = definition_from_json(Json::parse(R"({"name": "bmm_bf16_b2_n2_k2", "op_type": "bmm",
    "axes": {"batch": {"type": "const", "value": 2}, "M": {"type": "var"},
             "N": {"type": "const", "value": 2}, "K": {"type": "const", "value": 2}},
    "inputs": {"A": {"shape": ["batch", "M", "K"], "dtype": "bfloat16"},
               "B": {"shape": ["batch", "K", "N"], "dtype": "bfloat16"}},
    "outputs": {"C": {"shape": ["batch", "M", "N"], "dtype": "bfloat16"}},
    "reference": "def run(A, B):\n    pass\n"})"),
                                  ctx);
  ASSERT_TRUE(def) << diag.to_string();
  Tensor a(DType::kBFloat16, {2, 1, 2}), b(DType::kBFloat16, {2, 2, 2});
  const double av[] = {1, 2, 3, -1};                   // A[0] = [1 2], A[1] = [3 -1]
  const double bv[] = {1, 0, 0, 1, 0.5, 2, 4, -0.25};  // B[0] = I, B[1] = [[.5 2] [4 -.25]]
  for (int i = 0; i < 4; ++i) a.set(i, av[i]);
  for (int i = 0; i < 8; ++i) b.set(i, bv[i]);
  reference::Arguments args;
  args.tensors.emplace("A", a);
  args.tensors.emplace("B", b);
  const auto out = reference::run(*def, {{"M", 1}}, args);
  const Tensor& c = out.at("C");
  ASSERT_EQ(c.shape(), (Shape{2, 1, 2}));
  // [1 2] @ I = [1 2]; [3 -1] @ [[.5 2] [4 -.25]] = [1.5 - 4, 6 + .25] = [-2.5 6.25].
  EXPECT_EQ(c.get(0), 1.0);
  EXPECT_EQ(c.get(1), 2.0);
  EXPECT_EQ(c.get(2), -2.5);
  EXPECT_EQ(c.get(3), 6.25);
}

}  // namespace
}  // namespace fib::testing
