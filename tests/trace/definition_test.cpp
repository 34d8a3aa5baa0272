// definition_from_json: the valid paged definition's contents and accessors, the round trip,
// and one failing example per structural rule with its exact path, message and hint.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "support/temp_dir.h"
#include "trace_test_util.h"

namespace fib {
namespace {

using trace_test::Expected;
using trace_test::HasError;
using trace_test::json;
using trace_test::kFile;
using trace_test::OnlyError;
using trace_test::paged_definition_json;

std::optional<Definition> read(const Json& j, Diagnostics& diag) {
  ReadContext ctx{std::string(kFile), &diag};
  return definition_from_json(j, ctx);
}

// A definition with nothing optional and only 0-D tensors, so removing one field or breaking
// one type yields exactly one finding.
Json minimal_json() {
  return json(R"({
    "name": "minimal",
    "op_type": "test",
    "axes": {"n": {"type": "var"}},
    "inputs": {"x": {"shape": [], "dtype": "float32"}},
    "outputs": {"y": {"shape": [], "dtype": "float32"}},
    "reference": "def run(x):\n    return x\n"
  })");
}

// ------------------------------------------------------------------ valid definitions

TEST(DefinitionFromJson, PagedDefinitionFields) {
  Diagnostics diag;
  auto d = read(paged_definition_json(), diag);
  ASSERT_TRUE(d) << diag.to_string();
  EXPECT_TRUE(diag.empty()) << diag.to_string();
  EXPECT_EQ(d->name, "paged_decode_test");
  EXPECT_EQ(d->op_type, "gqa_paged");
  EXPECT_EQ(d->description, "A small paged decode definition for tests.");
  EXPECT_EQ(d->tags, (std::vector<std::string>{"stage:decode", "model:test-model",
                                               "model:other-model", "status:verified"}));

  ASSERT_EQ(d->axes.size(), 6u);
  EXPECT_EQ(d->axes[0].name, "batch_size");
  EXPECT_EQ(d->axes[0].kind, AxisKind::kVar);
  EXPECT_FALSE(d->axes[0].value.has_value());
  const Axis* heads = d->axis("num_qo_heads");
  ASSERT_NE(heads, nullptr);
  EXPECT_EQ(heads->kind, AxisKind::kConst);
  EXPECT_EQ(heads->value, 4);
  EXPECT_EQ(heads->description, "query heads");
  EXPECT_EQ(d->axis("head_dim")->value, 8);
  EXPECT_EQ(d->axis("heads"), nullptr);

  EXPECT_EQ(d->input_names(),
            (std::vector<std::string>{"q", "k_cache", "kv_indptr", "kv_indices", "alibi_slopes",
                                      "sm_scale", "window_left", "causal"}));
  const TensorSpec* q = d->input("q");
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(q->is_scalar());
  EXPECT_EQ(q->shape, (std::vector<std::string>{"batch_size", "num_qo_heads", "head_dim"}));
  EXPECT_EQ(q->dtype, DType::kBFloat16);
  EXPECT_FALSE(q->optional.has_value());
  EXPECT_FALSE(q->is_optional());
  EXPECT_TRUE(d->input("alibi_slopes")->is_optional());
  EXPECT_TRUE(d->input("sm_scale")->is_scalar());
  EXPECT_EQ(d->input("sm_scale")->dtype, DType::kFloat32);
  EXPECT_EQ(d->input("window_left")->dtype, DType::kInt32);
  EXPECT_EQ(d->input("causal")->dtype, DType::kBool);

  ASSERT_EQ(d->outputs.size(), 2u);
  EXPECT_EQ(d->outputs[0].name, "output");
  EXPECT_EQ(d->outputs[1].name, "lse");
  EXPECT_EQ(d->input("lse"), nullptr);
  EXPECT_EQ(d->output("lse"), &d->outputs[1]);
  EXPECT_EQ(d->tensor("lse"), &d->outputs[1]);
  EXPECT_EQ(d->tensor("q"), q);
  EXPECT_EQ(d->tensor("batch_size"), nullptr);

  EXPECT_EQ(d->constraints, (std::vector<std::string>{"len_indptr == batch_size + 1",
                                                      "num_kv_indices == kv_indptr[-1].item()"}));
  ASSERT_EQ(d->parsed_constraints.size(), 2u);
  EXPECT_EQ(d->parsed_constraints[1].text(), "num_kv_indices == kv_indptr[-1].item()");
  EXPECT_EQ(d->parsed_constraints[1].names(),
            (std::vector<std::string>{"num_kv_indices", "kv_indptr"}));
}

TEST(DefinitionFromJson, Accessors) {
  const Definition d = trace_test::paged_definition();
  EXPECT_EQ(d.var_axes(),
            (std::vector<std::string>{"batch_size", "num_pages", "len_indptr", "num_kv_indices"}));
  EXPECT_TRUE(d.has_tag("status:verified"));
  EXPECT_FALSE(d.has_tag("status"));
  EXPECT_EQ(d.tag_values("model:"), (std::vector<std::string>{"test-model", "other-model"}));
  EXPECT_EQ(d.tag_values("stage:"), (std::vector<std::string>{"decode"}));
  EXPECT_TRUE(d.tag_values("tp:").empty());

  // Var values in any order bind in definition order, with the const axes in between.
  const AxisValues vars = {
      {"num_kv_indices", 5}, {"len_indptr", 3}, {"batch_size", 2}, {"num_pages", 10}};
  auto bound = d.bind_axes(vars);
  ASSERT_TRUE(bound);
  EXPECT_EQ(*bound, (AxisValues{{"batch_size", 2},
                                {"num_qo_heads", 4},
                                {"head_dim", 8},
                                {"num_pages", 10},
                                {"len_indptr", 3},
                                {"num_kv_indices", 5}}));
  EXPECT_EQ(axis_value(*bound, "head_dim"), 8);
  EXPECT_EQ(axis_value(*bound, "nope"), std::nullopt);
  EXPECT_EQ(d.concrete_shape(*d.input("q"), *bound), (std::vector<std::int64_t>{2, 4, 8}));
  EXPECT_EQ(d.concrete_shape(*d.input("sm_scale"), *bound), std::vector<std::int64_t>{});
  EXPECT_EQ(d.concrete_shape(*d.output("lse"), *bound), (std::vector<std::int64_t>{2, 4}));
  // A var axis without a value: nothing binds, and shapes using it are unknown.
  EXPECT_EQ(d.bind_axes({{"batch_size", 2}, {"len_indptr", 3}, {"num_kv_indices", 5}}),
            std::nullopt);
  EXPECT_EQ(d.concrete_shape(*d.input("k_cache"), {{"head_dim", 8}}), std::nullopt);
}

TEST(DefinitionFromJson, RoundTripKeepsKeyOrderNullsAndAbsentFields) {
  // Unusual key orders, explicit nulls and no tags/constraints must all come back as written.
  const Json j = json(R"({
    "op_type": "test",
    "name": "odd_order",
    "description": null,
    "axes": {
      "n": {"description": "rows", "type": "var"},
      "k": {"value": 0, "type": "const", "description": null}
    },
    "inputs": {"x": {"dtype": "float4_e2m1", "shape": ["n", "k"], "optional": false}},
    "outputs": {"y": {"dtype": "float8_e5m2", "description": null, "shape": null}},
    "reference": "def run(x):\n    return x\n"
  })");
  Diagnostics diag;
  auto d = read(j, diag);
  ASSERT_TRUE(d) << diag.to_string();
  EXPECT_TRUE(diag.empty());
  EXPECT_FALSE(d->description.has_value());
  EXPECT_TRUE(d->tags.empty());
  EXPECT_EQ(d->axis("k")->value, 0);
  EXPECT_EQ(d->input("x")->optional, false);
  EXPECT_TRUE(d->output("y")->is_scalar());
  EXPECT_EQ(to_json(*d).dump(), j.dump());
}

TEST(DefinitionFromJson, PagedDefinitionRoundTrips) {
  const Json j = paged_definition_json();
  EXPECT_EQ(to_json(trace_test::paged_definition()).dump(), j.dump());
}

TEST(DefinitionFromJson, OutputMarkedNotOptionalIsAccepted) {
  Json j = paged_definition_json();
  j["outputs"]["lse"]["optional"] = false;
  Diagnostics diag;
  EXPECT_TRUE(read(j, diag)) << diag.to_string();
  EXPECT_TRUE(diag.empty());
}

TEST(DefinitionFromJson, ConstraintMayNameOutputs) {
  Json j = paged_definition_json();
  j["constraints"].push_back("lse.shape[0] == batch_size");
  Diagnostics diag;
  auto d = read(j, diag);
  ASSERT_TRUE(d) << diag.to_string();
  EXPECT_EQ(d->parsed_constraints.size(), 3u);
}

// ------------------------------------------------------------------ unknown fields
// An unknown field is an error, and a definition with an error is not returned: a typo in a
// field name must not silently drop what the author meant to say.

TEST(DefinitionFromJson, UnknownTopLevelFieldSuggestsTheClosest) {
  Json j = paged_definition_json();
  j["descripton"] = "typo";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.descripton", "unknown field 'descripton'", "did you mean 'description'?"}));
}

TEST(DefinitionFromJson, UnknownFieldWithNothingCloseListsTheFields) {
  Json j = paged_definition_json();
  j["zzz"] = 1;
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.zzz", "unknown field 'zzz'",
                               "expected one of: name, description, op_type, tags, axes, "
                               "constraints, inputs, outputs, reference"}));
}

TEST(DefinitionFromJson, UnknownAxisField) {
  Json j = paged_definition_json();
  j["axes"]["batch_size"]["descripion"] = "typo";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes.batch_size.descripion", "unknown field 'descripion'",
                               "did you mean 'description'?"}));
}

TEST(DefinitionFromJson, UnknownTensorField) {
  Json j = paged_definition_json();
  j["inputs"]["q"]["optinal"] = true;
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.inputs.q.optinal", "unknown field 'optinal'", "did you mean 'optional'?"}));
}

// ------------------------------------------------------------------ missing fields

class DefinitionMissingField : public ::testing::TestWithParam<const char*> {};

TEST_P(DefinitionMissingField, IsReportedAtTheRoot) {
  Json j = minimal_json();
  ASSERT_EQ(j.erase(GetParam()), 1u);
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$", std::string("missing required field '") + GetParam() + "'"}));
}

INSTANTIATE_TEST_SUITE_P(EveryRequiredField, DefinitionMissingField,
                         ::testing::Values("name", "op_type", "axes", "inputs", "outputs",
                                           "reference"));

TEST(DefinitionFromJson, OptionalFieldsMayBeAbsent) {
  Diagnostics diag;
  auto d = read(minimal_json(), diag);
  ASSERT_TRUE(d) << diag.to_string();
  EXPECT_TRUE(diag.empty());
  EXPECT_FALSE(d->description);
  EXPECT_TRUE(d->tags.empty());
  EXPECT_TRUE(d->constraints.empty());
  // Written back, the absent optional fields stay absent.
  EXPECT_EQ(to_json(*d).dump(), minimal_json().dump());
}

TEST(DefinitionFromJson, AxisWithoutType) {
  Json j = minimal_json();
  j["axes"]["n"] = Json::object();
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes.n", "missing required field 'type'"}));
}

TEST(DefinitionFromJson, TensorWithoutShape) {
  Json j = minimal_json();
  j["inputs"]["x"].erase("shape");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.inputs.x", "missing required field 'shape'"}));
}

TEST(DefinitionFromJson, TensorWithoutDtype) {
  Json j = minimal_json();
  j["outputs"]["y"].erase("dtype");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.outputs.y", "missing required field 'dtype'"}));
}

// ------------------------------------------------------------------ wrong JSON types

struct TypeCase {
  const char* label;
  const char* pointer;  // JSON pointer into minimal_json() or paged_definition_json()
  const char* value;    // JSON text put there
  bool paged;
  Expected expected;
};

void PrintTo(const TypeCase& c, std::ostream* os) { *os << c.label; }

class DefinitionWrongType : public ::testing::TestWithParam<TypeCase> {};

TEST_P(DefinitionWrongType, IsReportedWithExpectedAndFound) {
  const TypeCase& c = GetParam();
  Json j = c.paged ? paged_definition_json() : minimal_json();
  j[Json::json_pointer(c.pointer)] = json(c.value);
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, c.expected));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DefinitionWrongType,
    ::testing::Values(
        TypeCase{
            "NameIsANumber", "/name", "7", false, {"$.name", "expected a string, found integer 7"}},
        TypeCase{"NameIsEmpty",
                 "/name",
                 R"("")",
                 false,
                 {"$.name", "expected a non-empty string, found \"\""}},
        TypeCase{"OpTypeIsNull",
                 "/op_type",
                 "null",
                 false,
                 {"$.op_type", "expected a string, found null"}},
        TypeCase{"DescriptionIsANumber",
                 "/description",
                 "3",
                 false,
                 {"$.description", "expected a string, found integer 3"}},
        TypeCase{"TagsIsAString",
                 "/tags",
                 R"("model:x")",
                 false,
                 {"$.tags", "expected an array of strings, found string \"model:x\""}},
        TypeCase{"TagIsANumber",
                 "/tags",
                 R"(["model:x", 3])",
                 false,
                 {"$.tags[1]", "expected a string, found integer 3"}},
        TypeCase{"AxesIsAnArray",
                 "/axes",
                 R"(["n"])",
                 false,
                 {"$.axes", "expected an object of axis name -> {type, value}, found array"}},
        TypeCase{"AxisIsAString",
                 "/axes/n",
                 R"("var")",
                 false,
                 {"$.axes.n", "expected an object, found string \"var\""}},
        TypeCase{"AxisTypeIsANumber",
                 "/axes/n/type",
                 "1",
                 false,
                 {"$.axes.n.type", "expected a string, found integer 1"}},
        TypeCase{"AxisValueIsAString",
                 "/axes/num_qo_heads/value",
                 R"("4")",
                 true,
                 {"$.axes.num_qo_heads.value", "expected an integer, found string \"4\""}},
        TypeCase{"AxisValueIsAFloat",
                 "/axes/num_qo_heads/value",
                 "4.5",
                 true,
                 {"$.axes.num_qo_heads.value", "expected an integer, found number 4.5"}},
        TypeCase{"AxisValueTooLarge",
                 "/axes/num_qo_heads/value",
                 "18446744073709551615",
                 true,
                 {"$.axes.num_qo_heads.value",
                  "integer 18446744073709551615 is out of range (at most 2^63-1)"}},
        TypeCase{"InputsIsAnArray",
                 "/inputs",
                 R"(["x"])",
                 false,
                 {"$.inputs", "expected an object of name -> {shape, dtype}, found array"}},
        TypeCase{"TensorIsAnArray",
                 "/inputs/x",
                 R"(["n"])",
                 false,
                 {"$.inputs.x", "expected an object, found array"}},
        TypeCase{"ShapeIsAString",
                 "/inputs/q/shape",
                 R"("batch_size")",
                 true,
                 {"$.inputs.q.shape", "expected an array of strings, found string \"batch_size\""}},
        TypeCase{"ShapeEntryIsANumber",
                 "/inputs/q/shape/1",
                 "4",
                 true,
                 {"$.inputs.q.shape[1]", "expected a string, found integer 4"}},
        TypeCase{"DtypeIsANumber",
                 "/inputs/q/dtype",
                 "16",
                 true,
                 {"$.inputs.q.dtype", "expected a string, found integer 16"}},
        TypeCase{
            "OptionalIsAString",
            "/inputs/alibi_slopes/optional",
            R"("yes")",
            true,
            {"$.inputs.alibi_slopes.optional", "expected true or false, found string \"yes\""}},
        TypeCase{"OutputsIsAString",
                 "/outputs",
                 R"("y")",
                 false,
                 {"$.outputs", "expected an object of name -> {shape, dtype}, found string"}},
        TypeCase{"ReferenceIsANumber",
                 "/reference",
                 "5",
                 false,
                 {"$.reference", "expected a string, found integer 5"}},
        TypeCase{"ReferenceIsEmpty",
                 "/reference",
                 R"("")",
                 false,
                 {"$.reference", "expected a non-empty string, found \"\""}},
        TypeCase{"ConstraintsIsAString",
                 "/constraints",
                 R"("len_indptr == batch_size + 1")",
                 true,
                 {"$.constraints",
                  "expected an array of strings, found string \"len_indptr == batch_size + 1\""}}),
    [](const ::testing::TestParamInfo<TypeCase>& p) { return std::string(p.param.label); });

TEST(DefinitionFromJson, DocumentNotAnObject) {
  Diagnostics diag;
  EXPECT_FALSE(read(json("[1, 2]"), diag));
  EXPECT_TRUE(OnlyError(diag, {"$", "expected an object, found array"}));
}

// ------------------------------------------------------------------ axes

TEST(DefinitionFromJson, ShapeAxisNotDefinedSuggestsTheClosest) {
  Json j = paged_definition_json();
  j["inputs"]["q"]["shape"][1] = "num_qo_head";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.inputs.q.shape[1]", "axis 'num_qo_head' is not defined in axes",
                               "did you mean 'num_qo_heads'?"}));
}

TEST(DefinitionFromJson, OutputShapeAxisNotDefined) {
  Json j = paged_definition_json();
  j["outputs"]["lse"]["shape"][0] = "batch";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.outputs.lse.shape[0]", "axis 'batch' is not defined in axes",
                               "did you mean 'batch_size'?"}));
}

TEST(DefinitionFromJson, OddTensorNamesAreQuotedInThePath) {
  Json j = minimal_json();
  j["inputs"]["my input"] = json(R"({"shape": ["m"], "dtype": "float32"})");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.inputs[\"my input\"].shape[0]", "axis 'm' is not defined in axes",
                               "did you mean 'n'?"}));
}

TEST(DefinitionFromJson, ConstAxisWithoutValue) {
  Json j = paged_definition_json();
  j["axes"]["head_dim"].erase("value");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes.head_dim", "const axis 'head_dim' has no value",
                               "add \"value\": N, or make it \"var\""}));
}

TEST(DefinitionFromJson, VarAxisWithValue) {
  Json j = paged_definition_json();
  j["axes"]["batch_size"]["value"] = 3;
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.axes.batch_size.value", "var axis 'batch_size' must not have a value",
                       "make it \"const\" or drop \"value\""}));
}

TEST(DefinitionFromJson, NegativeConstValue) {
  Json j = paged_definition_json();
  j["axes"]["head_dim"]["value"] = -8;
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes.head_dim.value", "axis value must be >= 0, found -8"}));
}

TEST(DefinitionFromJson, UnknownAxisTypeSuggests) {
  Json j = paged_definition_json();
  j["axes"]["head_dim"]["type"] = "constant";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.axes.head_dim.type", "unknown axis type 'constant'", "did you mean 'const'?"}));
}

TEST(DefinitionFromJson, UnknownAxisTypeWithNothingClose) {
  Json j = paged_definition_json();
  j["axes"]["batch_size"]["type"] = "dynamic";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.axes.batch_size.type", "unknown axis type 'dynamic'",
                               "expected one of: const, var"}));
}

// ------------------------------------------------------------------ tensors

TEST(DefinitionFromJson, UnknownDtypeSuggests) {
  Json j = paged_definition_json();
  j["inputs"]["q"]["dtype"] = "bfloat61";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.inputs.q.dtype", "unknown dtype 'bfloat61'", "did you mean 'bfloat16'?"}));
}

TEST(DefinitionFromJson, UnknownDtypeWithNothingCloseListsAll) {
  Json j = paged_definition_json();
  j["outputs"]["lse"]["dtype"] = "fp8";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.outputs.lse.dtype", "unknown dtype 'fp8'",
                       "expected one of: float32, float16, bfloat16, float8_e4m3fn, "
                       "float8_e5m2, float4_e2m1, int64, int32, int16, int8, uint8, bool"}));
}

TEST(DefinitionFromJson, InputAndOutputWithTheSameName) {
  Json j = paged_definition_json();
  j["outputs"] = json(R"({"q": {"shape": ["batch_size"], "dtype": "float32"}})");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.outputs.q", "'q' is both an input and an output",
                               "give the output its own name (e.g. 'q_out')"}));
}

TEST(DefinitionFromJson, EmptyOutputs) {
  Json j = paged_definition_json();
  j["outputs"] = Json::object();
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.outputs", "a definition needs at least one output"}));
}

TEST(DefinitionFromJson, OptionalOutput) {
  Json j = paged_definition_json();
  j["outputs"]["lse"]["optional"] = true;
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.outputs.lse.optional", "outputs cannot be optional"}));
}

// ------------------------------------------------------------------ constraints

TEST(DefinitionFromJson, ConstraintSyntaxErrorHasTheColumn) {
  Json j = paged_definition_json();
  j["constraints"][0] = "len_indptr == batch_size +";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.constraints[0]",
                               "cannot parse constraint 'len_indptr == batch_size +': column 27: "
                               "unexpected end of expression"}));
}

TEST(DefinitionFromJson, ConstraintWithAssignmentInsteadOfEquality) {
  Json j = paged_definition_json();
  j["constraints"][0] = "len_indptr = batch_size + 1";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.constraints[0]",
                               "cannot parse constraint 'len_indptr = batch_size + 1': column 12: "
                               "unexpected character '='"}));
}

TEST(DefinitionFromJson, ConstraintNamingAnUnknownNameSuggests) {
  Json j = paged_definition_json();
  j["constraints"][1] = "num_kv_indices == kv_indpt[-1].item()";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.constraints[1]",
                               "constraint 'num_kv_indices == kv_indpt[-1].item()' names "
                               "'kv_indpt', which is neither an axis nor an input or output",
                               "did you mean 'kv_indptr'?"}));
}

TEST(DefinitionFromJson, ConstraintNamingAnUnknownAxisSuggests) {
  Json j = paged_definition_json();
  j["constraints"][0] = "len_indptr == batch_sizes + 1";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.constraints[0]",
                               "constraint 'len_indptr == batch_sizes + 1' names 'batch_sizes', "
                               "which is neither an axis nor an input or output",
                               "did you mean 'batch_size'?"}));
}

// ------------------------------------------------------------------ all findings at once

TEST(DefinitionFromJson, ReportsEveryProblemNotJustTheFirst) {
  Json j = paged_definition_json();
  j["name"] = 7;
  j["axes"]["head_dim"].erase("value");
  j["inputs"]["q"]["dtype"] = "bfloat61";
  j["constraints"][0] = "len_indptr ==";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_EQ(diag.size(), 4u) << diag.to_string();
  EXPECT_TRUE(HasError(diag, {"$.name", "expected a string, found integer 7"}));
  EXPECT_TRUE(HasError(diag, {"$.axes.head_dim", "const axis 'head_dim' has no value",
                              "add \"value\": N, or make it \"var\""}));
  EXPECT_TRUE(
      HasError(diag, {"$.inputs.q.dtype", "unknown dtype 'bfloat61'", "did you mean 'bfloat16'?"}));
  EXPECT_TRUE(HasError(diag, {"$.constraints[0]",
                              "cannot parse constraint 'len_indptr ==': column 14: unexpected end "
                              "of expression"}));
}

// ------------------------------------------------------------------ load_definition

TEST(LoadDefinition, ReadsAValidFile) {
  fib::testing::TempDir dir;
  const auto path = dir.write("definitions/gqa_paged/paged_decode_test.json",
                              dump_json_pretty(paged_definition_json()));
  const Definition d = load_definition(path.string());
  EXPECT_EQ(d.name, "paged_decode_test");
  EXPECT_EQ(d.inputs.size(), 8u);
}

TEST(LoadDefinition, ThrowsWithEveryFindingAndTheFileName) {
  fib::testing::TempDir dir;
  Json j = paged_definition_json();
  j["inputs"]["q"]["dtype"] = "bfloat61";
  j["descripton"] = "typo";
  const auto path = dir.write("bad.json", dump_json_pretty(j));
  try {
    (void)load_definition(path.string());
    FAIL() << "load_definition accepted an invalid definition";
  } catch (const Error& e) {
    ASSERT_EQ(e.diagnostics().size(), 2u) << e.what();
    for (const auto& d : e.diagnostics()) EXPECT_EQ(d.file, path.string());
    EXPECT_EQ(std::string(e.what()),
              path.string() +
                  ": $.descripton: error: unknown field 'descripton' (did you mean "
                  "'description'?)\n" +
                  path.string() +
                  ": $.inputs.q.dtype: error: unknown dtype 'bfloat61' (did you mean "
                  "'bfloat16'?)");
  }
}

TEST(LoadDefinition, MissingFileAndInvalidJson) {
  fib::testing::TempDir dir;
  const std::string missing = (dir.path() / "nope.json").string();
  try {
    (void)load_definition(missing);
    FAIL() << "no exception";
  } catch (const Error& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    EXPECT_EQ(e.diagnostics().items()[0].message, "file not found");
    EXPECT_EQ(e.diagnostics().items()[0].file, missing);
  }
  const auto bad = dir.write("bad.json", "{\n  \"name\": \"x\",\n}\n");
  try {
    (void)load_definition(bad.string());
    FAIL() << "no exception";
  } catch (const Error& e) {
    ASSERT_EQ(e.diagnostics().size(), 1u);
    EXPECT_PRED_FORMAT2(trace_test::Contains, e.diagnostics().items()[0].message,
                        "line 3, column 1: invalid JSON: ");
  }
}

}  // namespace
}  // namespace fib
