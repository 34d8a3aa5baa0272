// page_append references (append_paged_kv_cache, append_paged_mla_kv_cache): golden caches by
// hand on tiny inputs, and the errors they give.
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

constexpr const char* kLayout = R"(
    "batch_indices": {"shape": ["nnz_kv"], "dtype": "int32"},
    "positions": {"shape": ["nnz_kv"], "dtype": "int32"},)";
constexpr const char* kTable = R"(
    "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
    "kv_indptr": {"shape": ["batch_size_plus_1"], "dtype": "int32"},
    "kv_last_page_len": {"shape": ["batch_size"], "dtype": "int32"})";
constexpr const char* kVars = R"(
    "nnz_kv": {"type": "var"}, "num_pages": {"type": "var"}, "batch_size": {"type": "var"},
    "batch_size_plus_1": {"type": "var"}, "num_kv_indices": {"type": "var"},)";

// One KV head of dim 2, pages of 2 tokens.
Definition gqa_definition() {
  return parse(std::string(R"({"name": "append_paged_kv_cache_kv1_d2_ps2", "op_type": "page_append",
    "axes": {)") +
               kVars + R"(
      "num_kv_heads": {"type": "const", "value": 1}, "head_dim": {"type": "const", "value": 2},
      "page_size": {"type": "const", "value": 2}},
    "inputs": {
      "append_key": {"shape": ["nnz_kv", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
      "append_value": {"shape": ["nnz_kv", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},)" +
               kLayout + R"(
      "k_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
      "v_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},)" +
               kTable + R"(},
    "outputs": {
      "new_k_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
      "new_v_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"}},
    "reference": "def run():\n    pass\n"})");
}

Tensor ints(std::vector<int> v) {
  Tensor t(DType::kInt32, {static_cast<std::int64_t>(v.size())});
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

Tensor values(Shape shape, std::vector<double> v) {
  Tensor t(DType::kBFloat16, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

Tensor counting(Shape shape, double first) {
  Tensor t(DType::kBFloat16, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, first + static_cast<double>(i));
  return t;
}

// Sequence 0 holds page 2 (1 token), sequence 1 pages 0 and 1 (4 tokens). Token 0 appends at
// sequence 0's position 0 (page 2, slot 0), token 1 at sequence 1's position `last` (page 1,
// slot 1 for last = 3).
reference::Arguments table(reference::Arguments args, int last) {
  args.tensors.emplace("batch_indices", ints({0, 1}));
  args.tensors.emplace("positions", ints({0, last}));
  args.tensors.emplace("kv_indices", ints({2, 0, 1}));
  args.tensors.emplace("kv_indptr", ints({0, 1, 3}));
  args.tensors.emplace("kv_last_page_len", ints({1, 2}));
  return args;
}

const AxisValues kAxes = {{"nnz_kv", 2},
                          {"num_pages", 3},
                          {"batch_size", 2},
                          {"batch_size_plus_1", 3},
                          {"num_kv_indices", 3}};

reference::Arguments gqa_args(int last) {
  reference::Arguments args;
  args.tensors.emplace("append_key", values({2, 1, 2}, {1, 2, 3, 4}));
  args.tensors.emplace("append_value", values({2, 1, 2}, {-1, -2, -3, -4}));
  args.tensors.emplace("k_cache", counting({3, 2, 1, 2}, 100));
  args.tensors.emplace("v_cache", counting({3, 2, 1, 2}, 200));
  return table(std::move(args), last);
}

TEST(PageAppendReference, WritesEachTokenIntoItsSlotAndKeepsTheRest) {
  const auto out = reference::run(gqa_definition(), kAxes, gqa_args(3));
  // Slots (page * 2 + offset) of 2 elements: token 0 -> slot 4, token 1 -> slot 3.
  const double k[] = {100, 101, 102, 103, 104, 105, 3, 4, 1, 2, 110, 111};
  const double v[] = {200, 201, 202, 203, 204, 205, -3, -4, -1, -2, 210, 211};
  const Tensor& nk = out.at("new_k_cache");
  const Tensor& nv = out.at("new_v_cache");
  ASSERT_EQ(nk.shape(), (Shape{3, 2, 1, 2}));
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(nk.get(i), k[i]) << i;
    EXPECT_EQ(nv.get(i), v[i]) << i;
  }
}

TEST(PageAppendReference, APositionPastTheSequencesPagesIsNamed) {
  try {
    reference::run(gqa_definition(), kAxes, gqa_args(4));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                ::testing::HasSubstr("positions[1] = 4 lies past sequence 1's 2 pages of 2"));
  }
}

// MLA: a compressed kv of 2 and a k_pe of 1 per token; page_size is a var axis.
Definition mla_definition() {
  return parse(
      std::string(R"({"name": "append_paged_mla_kv_cache_ckv2_kpe1", "op_type": "page_append",
    "axes": {)") +
      kVars + R"(
      "page_size": {"type": "var"}, "head_dim_ckv": {"type": "const", "value": 2},
      "head_dim_kpe": {"type": "const", "value": 1}},
    "inputs": {
      "append_ckv": {"shape": ["nnz_kv", "head_dim_ckv"], "dtype": "bfloat16"},
      "append_kpe": {"shape": ["nnz_kv", "head_dim_kpe"], "dtype": "bfloat16"},)" +
      kLayout + R"(
      "ckv_cache": {"shape": ["num_pages", "page_size", "head_dim_ckv"], "dtype": "bfloat16"},
      "kpe_cache": {"shape": ["num_pages", "page_size", "head_dim_kpe"], "dtype": "bfloat16"},)" +
      kTable + R"(},
    "outputs": {
      "new_ckv_cache": {"shape": ["num_pages", "page_size", "head_dim_ckv"], "dtype": "bfloat16"},
      "new_kpe_cache": {"shape": ["num_pages", "page_size", "head_dim_kpe"], "dtype": "bfloat16"}},
    "reference": "def run():\n    pass\n"})");
}

TEST(PageAppendReference, MlaWritesTheLatentAndTheRopePart) {
  reference::Arguments args;
  args.tensors.emplace("append_ckv", values({2, 2}, {1, 2, 3, 4}));
  args.tensors.emplace("append_kpe", values({2, 1}, {-1, -3}));
  args.tensors.emplace("ckv_cache", counting({3, 2, 2}, 100));
  args.tensors.emplace("kpe_cache", counting({3, 2, 1}, 200));
  AxisValues axes = kAxes;
  axes.emplace_back("page_size", 2);
  const auto out = reference::run(mla_definition(), axes, table(std::move(args), 2));
  // Token 0 -> page 2 slot 0 (slot 4), token 1 at position 2 -> page 1 slot 0 (slot 2).
  const double ckv[] = {100, 101, 102, 103, 3, 4, 106, 107, 1, 2, 110, 111};
  const double kpe[] = {200, 201, -3, 203, -1, 205};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(out.at("new_ckv_cache").get(i), ckv[i]) << i;
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.at("new_kpe_cache").get(i), kpe[i]) << i;
}

}  // namespace
}  // namespace fib::testing
