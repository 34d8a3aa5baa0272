// The constraint language: every constraint form of the corpus with golden verdicts and
// violation details, Python arithmetic semantics, unknown/error verdicts, and syntax errors
// with their columns.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "fib/trace/constraint.h"

namespace fib {
namespace {

// An environment from plain maps. A tensor has a shape and, optionally, row-major contents; a
// name in `shapeless` is a tensor whose shape is not known.
class MapEnv : public ConstraintEnv {
 public:
  std::map<std::string, std::int64_t, std::less<>> axes;
  std::map<std::string, std::vector<std::int64_t>, std::less<>> shapes;
  std::map<std::string, std::vector<Scalar>, std::less<>> contents;
  std::vector<std::string> shapeless;

  std::optional<std::int64_t> axis(std::string_view name) const override {
    auto it = axes.find(name);
    if (it == axes.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::vector<std::int64_t>> tensor_shape(std::string_view name) const override {
    auto it = shapes.find(name);
    if (it == shapes.end()) return std::nullopt;
    return it->second;
  }
  std::optional<Scalar> tensor_element(std::string_view name,
                                       std::span<const std::int64_t> index) const override {
    auto it = contents.find(name);
    if (it == contents.end()) return std::nullopt;
    const auto& shape = shapes.find(name)->second;
    if (index.size() != shape.size()) {
      ADD_FAILURE() << "partial index for " << name;
      return std::nullopt;
    }
    std::int64_t flat = 0;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (index[i] < 0 || index[i] >= shape[i]) {
        ADD_FAILURE() << "index out of range for " << name;
        return std::nullopt;
      }
      flat = flat * shape[i] + index[i];
    }
    return it->second.at(static_cast<std::size_t>(flat));
  }
  bool is_tensor(std::string_view name) const override {
    if (shapes.count(name) > 0) return true;
    for (const auto& s : shapeless) {
      if (s == name) return true;
    }
    return false;
  }
};

std::vector<Scalar> ints(std::initializer_list<std::int64_t> v) {
  std::vector<Scalar> out;
  for (auto x : v) out.emplace_back(x);
  return out;
}

// Values under which every corpus constraint holds.
MapEnv corpus_env() {
  MapEnv e;
  e.axes = {{"batch_size", 4},
            {"len_indptr", 5},
            {"num_kv_indices", 9},
            {"total_q", 6},
            {"total_kv", 9},
            {"num_seqs", 2},
            {"len_cu_seqlens", 3},
            {"total_seq_len", 10},
            {"num_v_heads", 8},
            {"num_q_heads", 4},
            {"num_k_heads", 4},
            {"seq_len", 3},
            {"state_cache_size", 4},
            {"intermediate_size", 8},
            {"hidden_size", 16},
            {"num_tokens", 5},
            {"topk", 32},
            {"nheads", 8},
            {"ngroups", 2},
            {"max_num_pages", 4},
            {"page_size", 16},
            {"x", 2}};
  e.shapes = {{"kv_indptr", {5}},
              {"qo_indptr", {5}},
              {"cu_seqlens", {3}},
              {"gemm1_weights", {2, 16, 16}},
              {"gemm2_weights", {2, 16, 8}},
              {"sparse_indices", {5, 32}},
              {"ckv_cache", {10, 16, 512}},
              {"q", {4, 8, 16}},
              {"sm_scale", {}}};
  e.contents = {{"kv_indptr", ints({0, 2, 4, 7, 9})},
                {"qo_indptr", ints({0, 1, 3, 5, 6})},
                {"cu_seqlens", ints({0, 4, 10})},
                {"sm_scale", {Scalar{0.125}}}};
  e.shapeless = {"mystery"};
  return e;
}

ConstraintResult eval(std::string_view text, const ConstraintEnv& env) {
  std::string error;
  auto c = Constraint::parse(text, &error);
  if (!c) {
    ADD_FAILURE() << "cannot parse '" << text << "': " << error;
    return {Verdict::kError, error};
  }
  EXPECT_EQ(c->text(), text);
  return c->evaluate(env);
}

std::string verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kHolds:
      return "holds";
    case Verdict::kViolated:
      return "violated";
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kError:
      return "error";
  }
  return "?";
}

struct Golden {
  const char* text;
  Verdict verdict;
  const char* detail;  // expected detail (empty for kHolds)
};

void expect_golden(const std::vector<Golden>& cases, const ConstraintEnv& env) {
  for (const auto& g : cases) {
    const auto r = eval(g.text, env);
    EXPECT_EQ(verdict_name(r.verdict), verdict_name(g.verdict)) << g.text << " -> " << r.detail;
    EXPECT_EQ(r.detail, g.detail) << g.text;
  }
}

// ------------------------------------------------------------------ corpus forms

TEST(Constraint, EveryCorpusFormHoldsOnConsistentValues) {
  const MapEnv env = corpus_env();
  expect_golden({{"len_indptr == batch_size + 1", Verdict::kHolds, ""},
                 {"num_kv_indices == kv_indptr[-1].item()", Verdict::kHolds, ""},
                 {"total_q == qo_indptr[-1].item()", Verdict::kHolds, ""},
                 {"total_kv == kv_indptr[-1].item()", Verdict::kHolds, ""},
                 {"total_seq_len == cu_seqlens[-1].item()", Verdict::kHolds, ""},
                 {"len_cu_seqlens == num_seqs + 1", Verdict::kHolds, ""},
                 {"gemm1_weights.shape[1] == 2 * intermediate_size", Verdict::kHolds, ""},
                 {"gemm2_weights.shape[1] == hidden_size", Verdict::kHolds, ""},
                 {"gemm2_weights.shape[2] == intermediate_size", Verdict::kHolds, ""},
                 {"sparse_indices.shape[0] == num_tokens", Verdict::kHolds, ""},
                 {"sparse_indices.shape[-1] == topk", Verdict::kHolds, ""},
                 {"ckv_cache.shape[1] == page_size", Verdict::kHolds, ""},
                 {"nheads % ngroups == 0", Verdict::kHolds, ""},
                 {"num_v_heads % num_q_heads == 0", Verdict::kHolds, ""},
                 {"num_v_heads >= num_q_heads", Verdict::kHolds, ""},
                 {"num_k_heads == num_q_heads", Verdict::kHolds, ""},
                 {"seq_len > 1", Verdict::kHolds, ""},
                 {"state_cache_size >= batch_size", Verdict::kHolds, ""},
                 {"topk <= max_num_pages * page_size", Verdict::kHolds, ""}},
                env);
}

TEST(Constraint, EveryCorpusFormIsViolatedWithItsValues) {
  MapEnv env = corpus_env();
  env.axes["batch_size"] = 3;
  env.axes["len_indptr"] = 5;
  env.axes["num_kv_indices"] = 7;
  env.axes["total_q"] = 5;
  env.axes["total_seq_len"] = 11;
  env.axes["num_seqs"] = 3;
  env.axes["intermediate_size"] = 6;
  env.axes["hidden_size"] = 32;
  env.axes["num_tokens"] = 4;
  env.axes["topk"] = 2048;
  env.axes["ngroups"] = 3;
  env.axes["num_q_heads"] = 16;
  env.axes["num_k_heads"] = 2;
  env.axes["seq_len"] = 1;
  env.axes["state_cache_size"] = 2;
  env.axes["page_size"] = 64;
  expect_golden(
      {{"len_indptr == batch_size + 1", Verdict::kViolated, "len_indptr (5) == batch_size + 1 (4)"},
       {"num_kv_indices == kv_indptr[-1].item()", Verdict::kViolated,
        "num_kv_indices (7) == kv_indptr[-1].item() (9)"},
       {"total_q == qo_indptr[-1].item()", Verdict::kViolated,
        "total_q (5) == qo_indptr[-1].item() (6)"},
       {"total_seq_len == cu_seqlens[-1].item()", Verdict::kViolated,
        "total_seq_len (11) == cu_seqlens[-1].item() (10)"},
       {"len_cu_seqlens == num_seqs + 1", Verdict::kViolated,
        "len_cu_seqlens (3) == num_seqs + 1 (4)"},
       {"gemm1_weights.shape[1] == 2 * intermediate_size", Verdict::kViolated,
        "gemm1_weights.shape[1] (16) == 2 * intermediate_size (12)"},
       {"gemm2_weights.shape[1] == hidden_size", Verdict::kViolated,
        "gemm2_weights.shape[1] (16) == hidden_size (32)"},
       {"gemm2_weights.shape[2] == intermediate_size", Verdict::kViolated,
        "gemm2_weights.shape[2] (8) == intermediate_size (6)"},
       {"sparse_indices.shape[0] == num_tokens", Verdict::kViolated,
        "sparse_indices.shape[0] (5) == num_tokens (4)"},
       {"sparse_indices.shape[-1] == topk", Verdict::kViolated,
        "sparse_indices.shape[-1] (32) == topk (2048)"},
       {"ckv_cache.shape[1] == page_size", Verdict::kViolated,
        "ckv_cache.shape[1] (16) == page_size (64)"},
       {"nheads % ngroups == 0", Verdict::kViolated, "nheads % ngroups (2) == 0 (0)"},
       {"num_v_heads % num_q_heads == 0", Verdict::kViolated,
        "num_v_heads % num_q_heads (8) == 0 (0)"},
       {"num_v_heads >= num_q_heads", Verdict::kViolated, "num_v_heads (8) >= num_q_heads (16)"},
       {"num_k_heads == num_q_heads", Verdict::kViolated, "num_k_heads (2) == num_q_heads (16)"},
       {"seq_len > 1", Verdict::kViolated, "seq_len (1) > 1 (1)"},
       {"state_cache_size >= batch_size", Verdict::kViolated,
        "state_cache_size (2) >= batch_size (3)"},
       {"topk <= max_num_pages * page_size", Verdict::kViolated,
        "topk (2048) <= max_num_pages * page_size (256)"}},
      env);
}

TEST(Constraint, CorpusFormsNeedingContentsAreUnknownWithoutThem) {
  MapEnv env = corpus_env();
  env.contents.clear();
  expect_golden({{"num_kv_indices == kv_indptr[-1].item()", Verdict::kUnknown,
                  "the contents of 'kv_indptr' are not at hand"},
                 {"total_q == qo_indptr[-1].item()", Verdict::kUnknown,
                  "the contents of 'qo_indptr' are not at hand"},
                 // Shapes alone still decide the others.
                 {"gemm1_weights.shape[1] == 2 * intermediate_size", Verdict::kHolds, ""}},
                env);
}

TEST(Constraint, NamesInFirstUseOrder) {
  std::string error;
  auto c = Constraint::parse("gemm1_weights.shape[1] == 2 * intermediate_size", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->names(), (std::vector<std::string>{"gemm1_weights", "intermediate_size"}));
  c = Constraint::parse("num_kv_indices == kv_indptr[-1].item()", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->names(), (std::vector<std::string>{"num_kv_indices", "kv_indptr"}));
  // Functions, methods and attributes are not names; repeated names appear once.
  c = Constraint::parse("min(a, b) <= a + len(c.shape) and c.numel() > 0", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->names(), (std::vector<std::string>{"a", "b", "c"}));
  c = Constraint::parse("True", &error);
  ASSERT_TRUE(c) << error;
  EXPECT_TRUE(c->names().empty());
}

// ------------------------------------------------------------------ Python semantics

TEST(Constraint, PythonArithmetic) {
  const MapEnv env = corpus_env();  // x = 2
  expect_golden(
      {{"-7 // 2 == -4", Verdict::kHolds, ""},
       {"-7 % 2 == 1", Verdict::kHolds, ""},
       {"7 // -2 == -4", Verdict::kHolds, ""},
       {"7 % -2 == -1", Verdict::kHolds, ""},
       {"-7 // -2 == 3", Verdict::kHolds, ""},
       {"-7 % -2 == -1", Verdict::kHolds, ""},
       {"6 % 3 == 0", Verdict::kHolds, ""},
       {"7 / 2 == 3.5", Verdict::kHolds, ""},
       {"6 / 2 == 3", Verdict::kHolds, ""},
       {"-7.5 // 2 == -4", Verdict::kHolds, ""},
       {"-7.5 % 2 == 0.5", Verdict::kHolds, ""},
       {"2 ** 10 == 1024", Verdict::kHolds, ""},
       {"-2 ** 2 == -4", Verdict::kHolds, ""},
       {"(-2) ** 2 == 4", Verdict::kHolds, ""},
       {"2 ** -1 == 0.5", Verdict::kHolds, ""},
       {"2 ** 3 ** 2 == 512", Verdict::kHolds, ""},
       {"0 ** 0 == 1", Verdict::kHolds, ""},
       {"2 * (x + 1) == 6", Verdict::kHolds, ""},
       {"x * 3 - 1 == 5", Verdict::kHolds, ""},
       {"10 - 4 - 3 == 3", Verdict::kHolds, ""},
       {"12 // 3 // 2 == 2", Verdict::kHolds, ""},
       {"-x == -2", Verdict::kHolds, ""},
       {"+x == 2", Verdict::kHolds, ""},
       {"--x == 2", Verdict::kHolds, ""},
       {"1_000 == 1000", Verdict::kHolds, ""},
       {"1e3 == 1000", Verdict::kHolds, ""},
       {".5 == 0.5", Verdict::kHolds, ""},
       {"2.5e-1 == 0.25", Verdict::kHolds, ""},
       {"0.1 + 0.2 == 0.3", Verdict::kViolated, "0.1 + 0.2 (0.30000000000000004) == 0.3 (0.3)"},
       {"x / 4 == 1", Verdict::kViolated, "x / 4 (0.5) == 1 (1)"}},
      env);
}

TEST(Constraint, ComparisonsChainsAndBooleans) {
  const MapEnv env = corpus_env();  // x = 2
  expect_golden({{"1 < x < 3", Verdict::kHolds, ""},
                 {"1 < x < 2", Verdict::kViolated, "x (2) < 2 (2)"},
                 {"3 < x < 5", Verdict::kViolated, "3 (3) < x (2)"},
                 {"3 > x > 1 >= 1", Verdict::kHolds, ""},
                 {"x == 2 == 2.0", Verdict::kHolds, ""},
                 {"x != 3", Verdict::kHolds, ""},
                 {"True == 1", Verdict::kHolds, ""},
                 {"False", Verdict::kViolated, "False"},
                 {"x", Verdict::kHolds, ""},
                 {"x - 2", Verdict::kViolated, "x - 2"},
                 {"x == 2 and x > 1", Verdict::kHolds, ""},
                 {"x == 2 and x > 5", Verdict::kViolated, "x (2) > 5 (5)"},
                 {"x == 1 or x == 2", Verdict::kHolds, ""},
                 {"x == 1 or x == 3", Verdict::kViolated, "x (2) == 3 (3)"},
                 {"not x == 3", Verdict::kHolds, ""},
                 {"not (x == 1 or x == 3)", Verdict::kHolds, ""},
                 {"not x == 2", Verdict::kViolated, "not x == 2"},
                 {"x and 0", Verdict::kViolated, "x and 0"},
                 // x == 1 fails under `not`; it is not why the whole is violated.
                 {"not x == 1 and not x == 2", Verdict::kViolated, "not x == 1 and not x == 2"},
                 {"not x == 1 and x == 3", Verdict::kViolated, "x (2) == 3 (3)"},
                 {"(x == 1 or x == 2) and 0", Verdict::kViolated, "(x == 1 or x == 2) and 0"},
                 {"(x == 1) == False", Verdict::kHolds, ""},
                 {"(x == 1) == True", Verdict::kViolated, "x == 1 (False) == True (True)"},
                 {"0 or x", Verdict::kHolds, ""},
                 {"x > 1 and x < 3 or x == 10", Verdict::kHolds, ""}},
                env);
}

TEST(Constraint, Functions) {
  const MapEnv env = corpus_env();  // x = 2, q: [4, 8, 16]
  expect_golden({{"min(x, 5) == 2", Verdict::kHolds, ""},
                 {"max(x, 5, -1) == 5", Verdict::kHolds, ""},
                 {"min(3, 1, 2) == 1", Verdict::kHolds, ""},
                 {"max(1, 2.5) == 2.5", Verdict::kHolds, ""},
                 {"abs(-3) == 3", Verdict::kHolds, ""},
                 {"abs(x - 10) == 8", Verdict::kHolds, ""},
                 {"abs(-2.5) == 2.5", Verdict::kHolds, ""},
                 {"int(7 / 2) == 3", Verdict::kHolds, ""},
                 {"int(-7 / 2) == -3", Verdict::kHolds, ""},
                 {"float(x) == 2.0", Verdict::kHolds, ""},
                 {"len(q.shape) == 3", Verdict::kHolds, ""},
                 {"len(q) == 4", Verdict::kHolds, ""},
                 {"len(q[0]) == 8", Verdict::kHolds, ""},
                 {"min(x, 5) == 3", Verdict::kViolated, "min(x, 5) (2) == 3 (3)"}},
                env);
}

TEST(Constraint, TensorShapesAttributesAndMethods) {
  const MapEnv env = corpus_env();  // q: [4, 8, 16], kv_indptr: [0, 2, 4, 7, 9]
  expect_golden({{"q.shape[0] == 4", Verdict::kHolds, ""},
                 {"q.shape[-1] == 16", Verdict::kHolds, ""},
                 {"q.shape[-3] == 4", Verdict::kHolds, ""},
                 {"q[0].shape[0] == 8", Verdict::kHolds, ""},
                 {"q.ndim == 3", Verdict::kHolds, ""},
                 {"q[1].ndim == 2", Verdict::kHolds, ""},
                 {"q.dim() == 3", Verdict::kHolds, ""},
                 {"q.numel() == 512", Verdict::kHolds, ""},
                 {"q.size(1) == 8", Verdict::kHolds, ""},
                 {"q.size(-1) == 16", Verdict::kHolds, ""},
                 {"len(q.size()) == 3", Verdict::kHolds, ""},
                 {"kv_indptr[0] == 0", Verdict::kHolds, ""},
                 {"kv_indptr[2].item() == 4", Verdict::kHolds, ""},
                 {"kv_indptr[x] == 4", Verdict::kHolds, ""},
                 {"kv_indptr[-1] - kv_indptr[0] == 9", Verdict::kHolds, ""},
                 {"sm_scale.item() == 0.125", Verdict::kHolds, ""},
                 {"sm_scale > 0", Verdict::kHolds, ""},
                 {"kv_indptr[1] == 3", Verdict::kViolated, "kv_indptr[1] (2) == 3 (3)"}},
                env);
}

// ------------------------------------------------------------------ unknown and error verdicts

TEST(Constraint, UnknownWhenContentsOrShapesAreMissing) {
  MapEnv env = corpus_env();
  env.contents.erase("kv_indptr");
  expect_golden(
      {{"kv_indptr[0] == 0", Verdict::kUnknown, "the contents of 'kv_indptr' are not at hand"},
       {"mystery.shape[0] == 1", Verdict::kUnknown, "the shape of 'mystery' is not known"},
       // `and` short-circuits like Python: a false left side decides without contents.
       {"x == 3 and kv_indptr[0] == 0", Verdict::kViolated, "x (2) == 3 (3)"},
       {"x == 2 and kv_indptr[0] == 0", Verdict::kUnknown,
        "the contents of 'kv_indptr' are not at hand"},
       {"x == 2 or kv_indptr[0] == 0", Verdict::kHolds, ""}},
      env);
}

TEST(Constraint, ErrorsForUnknownNamesBadIndexesAndTypes) {
  const MapEnv env = corpus_env();
  expect_golden(
      {{"nope == 1", Verdict::kError, "unknown name 'nope'"},
       {"q.shape[3] == 1", Verdict::kError, "index 3 is out of range for size 3 in 'q.shape[3]'"},
       {"q.shape[-4] == 1", Verdict::kError,
        "index -4 is out of range for size 3 in 'q.shape[-4]'"},
       {"kv_indptr[5] == 0", Verdict::kError,
        "index 5 is out of range for size 5 in 'kv_indptr[5]'"},
       {"kv_indptr[-6] == 0", Verdict::kError,
        "index -6 is out of range for size 5 in 'kv_indptr[-6]'"},
       {"q.size(3) == 1", Verdict::kError, "index 3 is out of range for size 3 in 'q.size(3)'"},
       {"q[0][0][0][0] == 1", Verdict::kError,
        "too many indices for tensor 'q' in 'q[0][0][0][0]'"},
       {"q.shape[1.5] == 1", Verdict::kError, "index in 'q.shape[1.5]' is not an integer"},
       {"x // 0 == 1", Verdict::kError, "division by zero in 'x // 0'"},
       {"x % 0 == 1", Verdict::kError, "division by zero in 'x % 0'"},
       {"x / 0 == 1", Verdict::kError, "division by zero in 'x / 0'"},
       {"x / 0.0 == 1", Verdict::kError, "division by zero in 'x / 0.0'"},
       {"kv_indptr.item() == 0", Verdict::kError,
        "'kv_indptr.item()' has 5 elements; .item() needs exactly one"},
       {"q.shape == 3", Verdict::kError, "'q.shape' is (4, 8, 16), not a number"},
       {"kv_indptr.shape == 5", Verdict::kError, "'kv_indptr.shape' is (5,), not a number"},
       {"q == 1", Verdict::kError, "'q' is tensor q, not a number"},
       {"q.shape", Verdict::kError, "'q.shape' is not a boolean expression"},
       {"q.foo == 1", Verdict::kError, "unsupported attribute '.foo' in 'q.foo'"},
       {"x.shape[0] == 1", Verdict::kError, "unsupported attribute '.shape' in 'x.shape'"},
       {"q.mean() == 1", Verdict::kError, "unsupported method '.mean()' in 'q.mean()'"},
       {"len(x) == 1", Verdict::kError, "len() of a number in 'len(x)'"},
       {"x[0] == 1", Verdict::kError, "'x' cannot be indexed"},
       {"abs(1, 2) == 1", Verdict::kError, "abs() takes one argument"},
       {"min() == 1", Verdict::kError, "min() needs arguments"}},
      env);
}

TEST(Constraint, IntegerOverflowIsAnErrorNotUndefinedBehaviour) {
  MapEnv env = corpus_env();
  env.axes["big"] = std::numeric_limits<std::int64_t>::max();
  env.axes["small"] = std::numeric_limits<std::int64_t>::min();
  expect_golden(
      {{"2 ** 62 == 4611686018427387904", Verdict::kHolds, ""},
       {"big == 9223372036854775807", Verdict::kHolds, ""},
       {"2 ** 63 > 0", Verdict::kError, "integer overflow (beyond 64 bits) in '2 ** 63'"},
       {"big + 1 > 0", Verdict::kError, "integer overflow (beyond 64 bits) in 'big + 1'"},
       {"small - 1 < 0", Verdict::kError, "integer overflow (beyond 64 bits) in 'small - 1'"},
       {"big * 2 > 0", Verdict::kError, "integer overflow (beyond 64 bits) in 'big * 2'"},
       {"-small > 0", Verdict::kError, "integer overflow (beyond 64 bits) in '-small'"},
       {"abs(small) > 0", Verdict::kError, "integer overflow (beyond 64 bits) in 'abs(small)'"},
       {"small // -1 > 0", Verdict::kError, "integer overflow (beyond 64 bits) in 'small // -1'"},
       {"small % -1 == 0", Verdict::kHolds, ""},
       // Huge exponents finish at once instead of looping.
       {"3 ** 1000000000000 > 0", Verdict::kError,
        "integer overflow (beyond 64 bits) in '3 ** 1000000000000'"},
       {"1 ** 1000000000000 == 1", Verdict::kHolds, ""},
       {"(-1) ** 1000000000001 == -1", Verdict::kHolds, ""},
       {"0 ** 1000000000000 == 0", Verdict::kHolds, ""}},
      env);
}

TEST(Constraint, FloatsOutsideTheIntegerRange) {
  const MapEnv env = corpus_env();
  expect_golden(
      {{"int(1e300) > 0", Verdict::kError, "1e+300 cannot be converted to a 64-bit integer"},
       {"int(float(x)) == 2", Verdict::kHolds, ""},
       // Out-of-range literals become inf as in Python, not a parse failure.
       {"1e999 > 10 ** 18", Verdict::kHolds, ""}},
      env);
}

// ------------------------------------------------------------------ syntax errors

TEST(Constraint, DeepNestingIsRefusedInsteadOfExhaustingTheStack) {
  std::string error;
  const std::string fine = std::string(50, '(') + "x" + std::string(50, ')') + " == 2";
  auto c = Constraint::parse(fine, &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->evaluate(corpus_env()).verdict, Verdict::kHolds);

  EXPECT_FALSE(Constraint::parse(std::string(1000, '(') + "x" + std::string(1000, ')'), &error));
  EXPECT_EQ(error, "column 67: the expression nests deeper than 200 levels");
  EXPECT_FALSE(Constraint::parse(std::string(1000, '-') + "x", &error));
  EXPECT_EQ(error, "column 199: the expression nests deeper than 200 levels");
}

TEST(Constraint, SyntaxErrorsNameTheColumn) {
  const std::pair<const char*, const char*> cases[] = {
      {"a ==", "column 5: unexpected end of expression"},
      {"(a", "column 3: expected ')', found end of expression"},
      {"(a == b]", "column 8: expected ')', found ']'"},
      {"a $ b", "column 3: unexpected character '$'"},
      {"a = b", "column 3: unexpected character '='"},
      {"a ! b", "column 3: unexpected character '!'"},
      {"foo(a)", "column 1: unknown function 'foo' (supported: len, min, max, abs, int, float)"},
      {"x + foo(a)",
       "column 5: unknown function 'foo' (supported: len, min, max, abs, int, float)"},
      {"a b", "column 3: unexpected 'b' after the expression"},
      {"", "column 1: unexpected end of expression"},
      {"   ", "column 4: unexpected end of expression"},
      {"x.(1)", "column 3: expected an attribute name after '.'"},
      {"a == and", "column 6: unexpected keyword 'and'"},
      {"min(a, b", "column 9: expected ')', found end of expression"},
      {"a[1", "column 4: expected ']', found end of expression"},
      {")", "column 1: unexpected ')'"},
      {"a == * 2", "column 6: unexpected '*'"},
      {"99999999999999999999 > 0", "column 1: integer '99999999999999999999' is out of range"},
  };
  for (const auto& [text, message] : cases) {
    std::string error;
    EXPECT_FALSE(Constraint::parse(text, &error)) << text;
    EXPECT_EQ(error, message) << "'" << text << "'";
  }
  // The error pointer may be null.
  EXPECT_FALSE(Constraint::parse("a ==", nullptr));
}

// ------------------------------------------------------------------ scalars

TEST(ScalarToString, PythonSpelling) {
  EXPECT_EQ(scalar_to_string(Scalar{std::int64_t{7}}), "7");
  EXPECT_EQ(scalar_to_string(Scalar{std::int64_t{-3}}), "-3");
  EXPECT_EQ(scalar_to_string(Scalar{true}), "True");
  EXPECT_EQ(scalar_to_string(Scalar{false}), "False");
  EXPECT_EQ(scalar_to_string(Scalar{1.5}), "1.5");
  EXPECT_EQ(scalar_to_string(Scalar{0.1}), "0.1");
  EXPECT_EQ(scalar_to_string(Scalar{2.0}), "2.0");
  EXPECT_EQ(scalar_to_string(Scalar{-0.0}), "-0.0");
  EXPECT_EQ(scalar_to_string(Scalar{1e16}), "1e+16");
  EXPECT_EQ(scalar_to_string(Scalar{std::numeric_limits<double>::infinity()}), "inf");
  EXPECT_EQ(scalar_to_string(Scalar{std::numeric_limits<double>::quiet_NaN()}), "nan");
}

TEST(Constraint, FloatValuesInDetailsReadLikePython) {
  const MapEnv env = corpus_env();  // x = 2
  expect_golden({{"float(x) == 3", Verdict::kViolated, "float(x) (2.0) == 3 (3)"},
                 {"x / 1 > 2", Verdict::kViolated, "x / 1 (2.0) > 2 (2)"}},
                env);
}

}  // namespace
}  // namespace fib
