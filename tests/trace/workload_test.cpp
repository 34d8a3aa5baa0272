// workload_from_json and check_workload against the paged test definition: axes, inputs, input
// kinds, scalar values against dtypes, and constraints decided from axes; one failing example
// per rule with its exact path, message and hint.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fib/trace/workload.h"
#include "trace_test_util.h"

namespace fib {
namespace {

using trace_test::HasError;
using trace_test::json;
using trace_test::kFile;
using trace_test::OnlyError;

constexpr std::string_view kWorkload = R"({
  "uuid": "6f1c0e3a-0000-4000-8000-000000000001",
  "axes": {"batch_size": 3, "num_pages": 10, "len_indptr": 4, "num_kv_indices": 7},
  "inputs": {
    "q": {"type": "random"},
    "k_cache": {"type": "random"},
    "kv_indptr": {"type": "safetensors", "path": "./blob/workloads/w.safetensors", "tensor_key": "kv_indptr"},
    "kv_indices": {"type": "safetensors", "path": "./blob/workloads/w.safetensors", "tensor_key": "kv_indices"},
    "sm_scale": {"type": "scalar", "value": 0.125},
    "window_left": {"type": "scalar", "value": -1},
    "causal": {"type": "scalar", "value": true}
  }
})";

// Parses under `$.workload` (as inside a trace record).
std::optional<Workload> parse(const Json& j, Diagnostics& diag) {
  ReadContext ctx{std::string(kFile), &diag};
  const JsonPath root;
  return workload_from_json(j, root.key("workload"), ctx);
}

Workload must_parse(const Json& j) {
  Diagnostics diag;
  auto w = parse(j, diag);
  if (!w || !diag.empty()) throw std::runtime_error("workload did not parse:\n" + diag.to_string());
  return std::move(*w);
}

// Checks at the root, so paths read `$.axes...`.
bool check(const Definition& d, const Json& j, Diagnostics& diag) {
  const Workload w = must_parse(j);
  ReadContext ctx{std::string(kFile), &diag};
  return check_workload(d, w, JsonPath(), ctx);
}

class WorkloadTest : public ::testing::Test {
 protected:
  const Definition def_ = trace_test::paged_definition();
  Json w_ = json(kWorkload);
};

// ------------------------------------------------------------------ parsing

TEST_F(WorkloadTest, ParsesEveryInputKind) {
  const Workload w = must_parse(w_);
  EXPECT_EQ(w.uuid, "6f1c0e3a-0000-4000-8000-000000000001");
  EXPECT_EQ(
      w.axes,
      (AxisValues{{"batch_size", 3}, {"num_pages", 10}, {"len_indptr", 4}, {"num_kv_indices", 7}}));
  ASSERT_EQ(w.inputs.size(), 7u);
  EXPECT_EQ(w.input("q")->kind, InputKind::kRandom);
  const WorkloadInput* indptr = w.input("kv_indptr");
  ASSERT_NE(indptr, nullptr);
  EXPECT_EQ(indptr->kind, InputKind::kSafetensors);
  EXPECT_EQ(indptr->path, "./blob/workloads/w.safetensors");
  EXPECT_EQ(indptr->tensor_key, "kv_indptr");
  EXPECT_EQ(w.input("sm_scale")->kind, InputKind::kScalar);
  EXPECT_EQ(w.input("sm_scale")->value, Scalar{0.125});
  EXPECT_EQ(w.input("window_left")->value, Scalar{std::int64_t{-1}});
  EXPECT_EQ(w.input("causal")->value, Scalar{true});
  EXPECT_EQ(w.input("alibi_slopes"), nullptr);
  EXPECT_EQ(input_kind_name(InputKind::kRandom), "random");
  EXPECT_EQ(input_kind_name(InputKind::kScalar), "scalar");
  EXPECT_EQ(input_kind_name(InputKind::kSafetensors), "safetensors");
}

TEST_F(WorkloadTest, RoundTripKeepsKeyOrder) {
  EXPECT_EQ(to_json(must_parse(w_)).dump(), w_.dump());
  const Json odd = json(R"({"inputs": {"x": {"tensor_key": "k", "type": "safetensors",
      "path": "p"}, "s": {"value": 1.5, "type": "scalar"}}, "axes": {"b": 1}, "uuid": "u"})");
  EXPECT_EQ(to_json(must_parse(odd)).dump(), odd.dump());
}

TEST_F(WorkloadTest, UnknownInputTypeSuggests) {
  w_["inputs"]["q"]["type"] = "randn";
  Diagnostics diag;
  EXPECT_FALSE(parse(w_, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.workload.inputs.q.type", "unknown input type 'randn'", "did you mean 'random'?"}));
}

TEST_F(WorkloadTest, UnknownInputTypeWithNothingClose) {
  w_["inputs"]["q"]["type"] = "zeros";
  Diagnostics diag;
  EXPECT_FALSE(parse(w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.workload.inputs.q.type", "unknown input type 'zeros'",
                               "expected one of: random, scalar, safetensors"}));
}

struct FieldCase {
  const char* input;
  const char* field;
  const char* value;  // JSON
  const char* kind;
};
void PrintTo(const FieldCase& c, std::ostream* os) { *os << c.input << "." << c.field; }

class FieldNotOfThisKind : public ::testing::TestWithParam<FieldCase> {};

TEST_P(FieldNotOfThisKind, IsReported) {
  const FieldCase& c = GetParam();
  Json w = json(kWorkload);
  w["inputs"][c.input][c.field] = json(c.value);
  Diagnostics diag;
  EXPECT_FALSE(parse(w, diag));
  EXPECT_TRUE(OnlyError(
      diag, {std::string("$.workload.inputs.") + c.input + "." + c.field,
             std::string("field '") + c.field + "' does not belong to a '" + c.kind + "' input"}));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FieldNotOfThisKind,
    ::testing::Values(FieldCase{"q", "value", "1", "random"},
                      FieldCase{"q", "path", R"("./blob/a.safetensors")", "random"},
                      FieldCase{"q", "tensor_key", R"("q")", "random"},
                      FieldCase{"sm_scale", "path", R"("./blob/a.safetensors")", "scalar"},
                      FieldCase{"sm_scale", "tensor_key", R"("sm_scale")", "scalar"},
                      FieldCase{"kv_indptr", "value", "0", "safetensors"}));

TEST_F(WorkloadTest, UnknownInputFieldSuggests) {
  w_["inputs"]["kv_indptr"]["tensorkey"] = "kv_indptr";
  w_["inputs"]["kv_indptr"].erase("tensor_key");
  Diagnostics diag;
  EXPECT_FALSE(parse(w_, diag));
  EXPECT_EQ(diag.size(), 2u) << diag.to_string();
  EXPECT_TRUE(HasError(diag, {"$.workload.inputs.kv_indptr.tensorkey", "unknown field 'tensorkey'",
                              "did you mean 'tensor_key'?"}));
  EXPECT_TRUE(
      HasError(diag, {"$.workload.inputs.kv_indptr", "missing required field 'tensor_key'"}));
}

TEST_F(WorkloadTest, ScalarWithoutValue) {
  w_["inputs"]["sm_scale"].erase("value");
  Diagnostics diag;
  EXPECT_FALSE(parse(w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.workload.inputs.sm_scale", "missing required field 'value'"}));
}

TEST_F(WorkloadTest, ScalarValueOfTheWrongJsonType) {
  w_["inputs"]["sm_scale"]["value"] = "0.125";
  Diagnostics diag;
  EXPECT_FALSE(parse(w_, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.workload.inputs.sm_scale.value", "expected a number or boolean, found string"}));
}

TEST_F(WorkloadTest, SafetensorsWithoutPath) {
  w_["inputs"]["kv_indices"].erase("path");
  Diagnostics diag;
  EXPECT_FALSE(parse(w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.workload.inputs.kv_indices", "missing required field 'path'"}));
}

TEST_F(WorkloadTest, InputWithoutType) {
  w_["inputs"]["q"] = Json::object();
  Diagnostics diag;
  EXPECT_FALSE(parse(w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.workload.inputs.q", "missing required field 'type'"}));
}

TEST_F(WorkloadTest, StructuralTypes) {
  {
    Json w = json(kWorkload);
    w["axes"]["batch_size"] = 3.0;
    Diagnostics diag;
    EXPECT_FALSE(parse(w, diag));
    EXPECT_TRUE(
        OnlyError(diag, {"$.workload.axes.batch_size", "expected an integer, found number 3.0"}));
  }
  {
    Json w = json(kWorkload);
    w["axes"] = json("[3, 10]");
    Diagnostics diag;
    EXPECT_FALSE(parse(w, diag));
    EXPECT_TRUE(OnlyError(
        diag, {"$.workload.axes", "expected an object of axis name -> integer, found array"}));
  }
  {
    Json w = json(kWorkload);
    w["inputs"] = "random";
    Diagnostics diag;
    EXPECT_FALSE(parse(w, diag));
    EXPECT_TRUE(OnlyError(diag, {"$.workload.inputs",
                                 "expected an object of input name -> {type, ...}, found string"}));
  }
  {
    Json w = json(kWorkload);
    w.erase("uuid");
    Diagnostics diag;
    EXPECT_FALSE(parse(w, diag));
    EXPECT_TRUE(OnlyError(diag, {"$.workload", "missing required field 'uuid'"}));
  }
}

// ------------------------------------------------------------------ check_workload

TEST_F(WorkloadTest, ValidWorkloadPasses) {
  Diagnostics diag;
  EXPECT_TRUE(check(def_, w_, diag));
  EXPECT_TRUE(diag.empty()) << diag.to_string();
}

TEST_F(WorkloadTest, MissingVarAxis) {
  w_["axes"].erase("num_pages");
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes", "missing value for var axis 'num_pages'"}));
}

TEST_F(WorkloadTest, ExtraAxisSuggests) {
  w_["axes"]["batch_sizes"] = 3;
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes.batch_sizes",
                               "'batch_sizes' is not an axis of "
                               "paged_decode_test",
                               "did you mean 'batch_size'?"}));
}

TEST_F(WorkloadTest, ConstAxisGiven) {
  w_["axes"]["head_dim"] = 8;
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.axes.head_dim", "'head_dim' is a const axis (8) and must not be given"}));
}

TEST_F(WorkloadTest, ZeroAxis) {
  w_["axes"]["num_pages"] = 0;
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes.num_pages", "axis 'num_pages' must be positive, found 0"}));
}

TEST_F(WorkloadTest, NegativeAxis) {
  w_["axes"]["batch_size"] = -2;
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.axes.batch_size", "axis 'batch_size' must be positive, found -2"}));
}

TEST_F(WorkloadTest, MissingInput) {
  w_["inputs"].erase("kv_indices");
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.inputs", "missing input 'kv_indices'",
                               "add it (use {\"type\": \"random\"} to have it generated)"}));
}

TEST_F(WorkloadTest, OptionalInputMayBeMissingOrGiven) {
  ASSERT_EQ(w_["inputs"].count("alibi_slopes"), 0u);
  Diagnostics diag;
  EXPECT_TRUE(check(def_, w_, diag)) << diag.to_string();
  w_["inputs"]["alibi_slopes"] = json(R"({"type": "random"})");
  EXPECT_TRUE(check(def_, w_, diag)) << diag.to_string();
  EXPECT_TRUE(diag.empty());
}

TEST_F(WorkloadTest, ExtraInputSuggests) {
  w_["inputs"]["kv_indice"] = json(R"({"type": "random"})");
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.inputs.kv_indice",
                               "'kv_indice' is not an input of "
                               "paged_decode_test",
                               "did you mean 'kv_indices'?"}));
}

TEST_F(WorkloadTest, OutputGivenAsAnInput) {
  w_["inputs"]["lse"] = json(R"({"type": "random"})");
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.inputs.lse", "'lse' is not an input of paged_decode_test",
                               "expected one of: q, k_cache, kv_indptr, kv_indices, alibi_slopes, "
                               "sm_scale, window_left, causal"}));
}

TEST_F(WorkloadTest, ScalarSpecGivenAsRandom) {
  w_["inputs"]["sm_scale"] = json(R"({"type": "random"})");
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.inputs.sm_scale.type",
                               "input 'sm_scale' is a scalar in the definition but given as "
                               "'random'",
                               "use {\"type\": \"scalar\", \"value\": ...}"}));
}

TEST_F(WorkloadTest, ScalarSpecGivenAsSafetensors) {
  w_["inputs"]["window_left"] =
      json(R"({"type": "safetensors", "path": "./blob/w.safetensors", "tensor_key": "w"})");
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.inputs.window_left.type",
                               "input 'window_left' is a scalar in the definition but given as "
                               "'safetensors'",
                               "use {\"type\": \"scalar\", \"value\": ...}"}));
}

TEST_F(WorkloadTest, TensorGivenAsScalar) {
  w_["inputs"]["q"] = json(R"({"type": "scalar", "value": 1.0})");
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.inputs.q.type", "input 'q' is a tensor in the definition but given as a scalar",
             "use \"random\" or \"safetensors\""}));
}

struct ScalarCase {
  const char* label;
  const char* input;
  const char* value;    // JSON
  const char* message;  // empty: accepted
};
void PrintTo(const ScalarCase& c, std::ostream* os) { *os << c.label; }

class ScalarValueFit : public ::testing::TestWithParam<ScalarCase> {};

TEST_P(ScalarValueFit, AgainstTheDtype) {
  const ScalarCase& c = GetParam();
  const Definition def = trace_test::paged_definition();
  Json w = json(kWorkload);
  w["inputs"][c.input]["value"] = json(c.value);
  Diagnostics diag;
  const bool ok = check(def, w, diag);
  if (std::string_view(c.message).empty()) {
    EXPECT_TRUE(ok);
    EXPECT_TRUE(diag.empty()) << diag.to_string();
  } else {
    EXPECT_FALSE(ok);
    EXPECT_TRUE(OnlyError(diag, {std::string("$.inputs.") + c.input + ".value", c.message}));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ScalarValueFit,
    ::testing::Values(
        ScalarCase{"FloatForInt32", "window_left", "1.5", "value 1.5 does not fit dtype int32"},
        ScalarCase{"IntegralFloatForInt32", "window_left", "2.0",
                   "value 2.0 does not fit dtype int32"},
        ScalarCase{"BoolForInt32", "window_left", "true", "value True does not fit dtype int32"},
        ScalarCase{"IntForInt32", "window_left", "128", ""},
        ScalarCase{"IntForBool", "causal", "1", "value 1 does not fit dtype bool"},
        ScalarCase{"FloatForBool", "causal", "0.5", "value 0.5 does not fit dtype bool"},
        ScalarCase{"FalseForBool", "causal", "false", ""},
        ScalarCase{"BoolForFloat32", "sm_scale", "false", "value False does not fit dtype float32"},
        ScalarCase{"IntForFloat32", "sm_scale", "1", ""},
        ScalarCase{"NegativeFloatForFloat32", "sm_scale", "-0.5", ""}),
    [](const ::testing::TestParamInfo<ScalarCase>& p) { return std::string(p.param.label); });

TEST_F(WorkloadTest, ConstraintViolationShowsTheValues) {
  w_["axes"]["len_indptr"] = 5;
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes",
                               "violates constraint 'len_indptr == batch_size + 1': len_indptr (5) "
                               "== batch_size + 1 (4)"}));
}

TEST_F(WorkloadTest, ConstraintNeedingTensorContentsIsNotDecidedFromAxes) {
  // num_kv_indices == kv_indptr[-1].item() needs the blob; any num_kv_indices passes here.
  w_["axes"]["num_kv_indices"] = 12345;
  Diagnostics diag;
  EXPECT_TRUE(check(def_, w_, diag));
  EXPECT_TRUE(diag.empty()) << diag.to_string();
}

TEST_F(WorkloadTest, ConstraintThatCannotBeEvaluated) {
  Json dj = trace_test::paged_definition_json();
  dj["constraints"].push_back("kv_indptr.shape[1] == 1");
  const Definition def = trace_test::must_parse_definition(dj);
  Diagnostics diag;
  EXPECT_FALSE(check(def, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes",
                               "cannot evaluate constraint 'kv_indptr.shape[1] == 1': index 1 is "
                               "out of range for size 1 in 'kv_indptr.shape[1]'"}));
}

TEST_F(WorkloadTest, ShapeConstraintDecidedFromAxes) {
  Json dj = trace_test::paged_definition_json();
  dj["constraints"].push_back("k_cache.shape[0] >= batch_size * 4");
  const Definition def = trace_test::must_parse_definition(dj);
  Diagnostics diag;
  EXPECT_FALSE(check(def, w_, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes",
                               "violates constraint 'k_cache.shape[0] >= batch_size * 4': "
                               "k_cache.shape[0] (10) >= batch_size * 4 (12)"}));
}

TEST_F(WorkloadTest, ReportsEveryProblemAtOnce) {
  w_["axes"].erase("num_pages");
  w_["axes"]["head_dim"] = 8;
  w_["inputs"].erase("q");
  w_["inputs"]["extra"] = json(R"({"type": "random"})");
  Diagnostics diag;
  EXPECT_FALSE(check(def_, w_, diag));
  EXPECT_EQ(diag.size(), 4u) << diag.to_string();
  EXPECT_TRUE(HasError(diag, {"$.axes", "missing value for var axis 'num_pages'"}));
  EXPECT_TRUE(
      HasError(diag, {"$.axes.head_dim", "'head_dim' is a const axis (8) and must not be given"}));
  EXPECT_TRUE(HasError(diag, {"$.inputs", "missing input 'q'",
                              "add it (use {\"type\": \"random\"} to have it generated)"}));
  EXPECT_TRUE(HasError(diag, {"$.inputs.extra", "'extra' is not an input of paged_decode_test",
                              "expected one of: q, k_cache, kv_indptr, kv_indices, alibi_slopes, "
                              "sm_scale, window_left, causal"}));
}

// ------------------------------------------------------------------ WorkloadConstraintEnv

TEST_F(WorkloadTest, ConstraintEnvSeesAxesShapesAndGivenContents) {
  const Workload w = must_parse(w_);
  const auto bound = def_.bind_axes(w.axes);
  ASSERT_TRUE(bound);
  const std::vector<std::int64_t> indptr = {0, 2, 5, 7};
  WorkloadConstraintEnv env(
      def_, *bound,
      [&](std::string_view name, std::span<const std::int64_t> index) -> std::optional<Scalar> {
        if (name != "kv_indptr" || index.size() != 1) return std::nullopt;
        return Scalar{indptr.at(static_cast<std::size_t>(index[0]))};
      });
  EXPECT_EQ(env.axis("batch_size"), 3);
  EXPECT_EQ(env.axis("head_dim"), 8);
  EXPECT_EQ(env.axis("q"), std::nullopt);
  EXPECT_TRUE(env.is_tensor("q"));
  EXPECT_TRUE(env.is_tensor("lse"));
  EXPECT_TRUE(env.is_tensor("sm_scale"));
  EXPECT_FALSE(env.is_tensor("batch_size"));
  EXPECT_EQ(env.tensor_shape("q"), (std::vector<std::int64_t>{3, 4, 8}));
  EXPECT_EQ(env.tensor_shape("lse"), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(env.tensor_shape("sm_scale"), std::vector<std::int64_t>{});
  EXPECT_EQ(env.tensor_shape("batch_size"), std::nullopt);

  const Constraint& c = def_.parsed_constraints[1];  // num_kv_indices == kv_indptr[-1].item()
  EXPECT_EQ(c.evaluate(env).verdict, Verdict::kHolds);

  auto more = *bound;
  for (auto& [n, v] : more) {
    if (n == "num_kv_indices") v = 9;
  }
  WorkloadConstraintEnv env9(
      def_, more, [&](std::string_view, std::span<const std::int64_t> index) {
        return std::optional<Scalar>(indptr.at(static_cast<std::size_t>(index[0])));
      });
  const auto r = c.evaluate(env9);
  EXPECT_EQ(r.verdict, Verdict::kViolated);
  EXPECT_EQ(r.detail, "num_kv_indices (9) == kv_indptr[-1].item() (7)");

  WorkloadConstraintEnv no_contents(def_, *bound);
  const auto u = c.evaluate(no_contents);
  EXPECT_EQ(u.verdict, Verdict::kUnknown);
  EXPECT_EQ(u.detail, "the contents of 'kv_indptr' are not at hand");
}

}  // namespace
}  // namespace fib
