// comm: each collective's math over world_size shards on hand-computed values (2 ranks).
#include <gtest/gtest.h>

#include "fib/reference/reference.h"
#include "fib/trace/json_reader.h"

namespace fib::testing {
namespace {

Definition comm_def(const std::string& in_shape, const std::string& out_shape) {
  Diagnostics diag;
  ReadContext ctx{"test", &diag};
  auto d = definition_from_json(Json::parse(R"({"name": "c", "op_type": "comm",
    "axes": {"world_size": {"type": "var"}, "num_tokens": {"type": "var"},
             "hidden_size": {"type": "const", "value": 2}},
    "inputs": {"input": {"shape": )" + in_shape +
                                            R"(, "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": )" + out_shape +
                                            R"(, "dtype": "bfloat16"}},
    "reference": "def run(input):\n    pass\n"})"),
                                ctx);
  EXPECT_TRUE(d) << diag.to_string();
  return *d;
}

std::vector<double> run_comm(const Definition& def, Shape shape) {
  Tensor in(DType::kBFloat16, shape);
  for (std::int64_t i = 0; i < in.numel(); ++i) in.set(i, static_cast<double>(i));
  reference::Arguments args;
  args.tensors.emplace("input", in);
  const auto out = reference::run(
      def, {{"world_size", shape[0]}, {"num_tokens", shape[shape.size() - 2]}}, args);
  std::vector<double> v;
  for (std::int64_t i = 0; i < out.at("output").numel(); ++i) v.push_back(out.at("output").get(i));
  return v;
}

TEST(CommReference, EachCollectiveOverTwoRanks) {
  const std::string w_t_h = R"(["world_size", "num_tokens", "hidden_size"])";
  const std::string w_w_t_h = R"(["world_size", "world_size", "num_tokens", "hidden_size"])";
  // input [2 ranks, 1 token, 2] = rank 0: [0 1], rank 1: [2 3].
  EXPECT_EQ(run_comm(comm_def(w_t_h, R"(["num_tokens", "hidden_size"])"), {2, 1, 2}),
            (std::vector<double>{2, 4}));  // all_reduce: the sum
  EXPECT_EQ(run_comm(comm_def(w_t_h, R"(["num_tokens", "world_size", "hidden_size"])"), {2, 2, 2}),
            (std::vector<double>{0, 1, 4, 5, 2, 3, 6, 7}));  // all_gather: token-major
  // input [2, 2, 1, 2]: [s][r] = {0 1}, {2 3} | {4 5}, {6 7}.
  EXPECT_EQ(run_comm(comm_def(w_w_t_h, w_t_h), {2, 2, 1, 2}),
            (std::vector<double>{4, 6, 8, 10}));  // reduce_scatter: chunk r summed over s
  EXPECT_EQ(run_comm(comm_def(w_w_t_h, w_w_t_h), {2, 2, 1, 2}),
            (std::vector<double>{0, 1, 4, 5, 2, 3, 6, 7}));  // all_to_all: [d][s] = [s][d]
}

}  // namespace
}  // namespace fib::testing
