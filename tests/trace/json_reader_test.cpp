// The strict JSON reading blocks: JsonPath rendering, KeyOrder, read_object, the typed getters
// with their "expected X, found Y" messages, extended numbers and write_object.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fib/trace/json_reader.h"
#include "trace_test_util.h"

namespace fib {
namespace {

using trace_test::json;
using trace_test::kFile;
using trace_test::OnlyError;

// ------------------------------------------------------------------ JsonPath

TEST(JsonPath, Rendering) {
  const JsonPath root;
  EXPECT_EQ(root.str(), "$");
  EXPECT_EQ(root.key("inputs").key("q").key("shape").index(1).str(), "$.inputs.q.shape[1]");
  EXPECT_EQ(root.key("sources").index(0).key("path").str(), "$.sources[0].path");
  EXPECT_EQ(root.index(3).index(0).str(), "$[3][0]");
  EXPECT_EQ(root.key("libs").key("flashinfer-python").str(), "$.libs.flashinfer-python");
  EXPECT_EQ(root.key("_x1").str(), "$._x1");
}

TEST(JsonPath, KeysWithOddCharactersAreQuoted) {
  const JsonPath root;
  EXPECT_EQ(root.key("axes").key("odd key").str(), "$.axes[\"odd key\"]");
  EXPECT_EQ(root.key("").str(), "$[\"\"]");
  EXPECT_EQ(root.key("a.b").key("c").str(), "$[\"a.b\"].c");
  EXPECT_EQ(root.key("x[0]").str(), "$[\"x[0]\"]");
  EXPECT_EQ(root.key("d\xc3\xa9j\xc3\xa0").str(), "$[\"d\xc3\xa9j\xc3\xa0\"]");
  // Quotes, backslashes and control characters are escaped, so the path reads unambiguously.
  EXPECT_EQ(root.key("say \"hi\"").str(), "$[\"say \\\"hi\\\"\"]");
  EXPECT_EQ(root.key("a\\b").str(), "$[\"a\\\\b\"]");
  EXPECT_EQ(root.key("line\nbreak").str(), "$[\"line\\nbreak\"]");
  EXPECT_EQ(root.key(std::string_view("\x01", 1)).str(), "$[\"\\u0001\"]");
}

TEST(JsonPath, ChildrenShareTheirParent) {
  const JsonPath root;
  const JsonPath inputs = root.key("inputs");
  const JsonPath a = inputs.key("a");
  const JsonPath b = inputs.key("b");
  EXPECT_EQ(a.str(), "$.inputs.a");
  EXPECT_EQ(b.str(), "$.inputs.b");
  EXPECT_EQ(inputs.str(), "$.inputs");
}

// ------------------------------------------------------------------ KeyOrder

TEST(KeyOrder, RecordsFieldsInOrder) {
  KeyOrder o;
  EXPECT_EQ(o.size(), 0);
  o.push(3);
  o.push(0);
  o.push(15);
  EXPECT_EQ(o.size(), 3);
  EXPECT_EQ(o.at(0), 3);
  EXPECT_EQ(o.at(1), 0);
  EXPECT_EQ(o.at(2), 15);
  EXPECT_TRUE(o.contains(0));
  EXPECT_TRUE(o.contains(15));
  EXPECT_FALSE(o.contains(1));
}

TEST(KeyOrder, IgnoresOutOfRangeFieldsAndHoldsAtMostSixteen) {
  KeyOrder o;
  o.push(16);
  o.push(-1);
  EXPECT_EQ(o.size(), 0);
  for (int i = 0; i < 20; ++i) o.push(i % 16);
  EXPECT_EQ(o.size(), 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(o.at(i), i);
}

TEST(KeyOrder, Equality) {
  KeyOrder a, b;
  EXPECT_EQ(a, b);
  a.push(1);
  a.push(2);
  b.push(2);
  b.push(1);
  EXPECT_NE(a, b);
  KeyOrder c;
  c.push(1);
  c.push(2);
  EXPECT_EQ(a, c);
}

// ------------------------------------------------------------------ read_object

constexpr std::string_view kFields[] = {"shape", "dtype", "description"};

TEST(ReadObject, FindsFieldsAndRecordsTheirOrder) {
  const Json j = json(R"({"dtype": "int32", "shape": ["n"]})");
  const Json* found[3];
  KeyOrder order;
  Diagnostics diag;
  ReadContext ctx{std::string(kFile), &diag};
  ASSERT_TRUE(read_object(j, JsonPath(), ctx, kFields, found, &order));
  EXPECT_TRUE(diag.empty());
  EXPECT_EQ(found[0], &j["shape"]);
  EXPECT_EQ(found[1], &j["dtype"]);
  EXPECT_EQ(found[2], nullptr);
  EXPECT_EQ(order.size(), 2);
  EXPECT_EQ(order.at(0), 1);
  EXPECT_EQ(order.at(1), 0);
}

TEST(ReadObject, UnknownKeysAreErrorsWithSuggestions) {
  const Json j = json(R"({"shape": [], "dtyp": "int32", "zzzz": 1})");
  const Json* found[3];
  Diagnostics diag;
  ReadContext ctx{std::string(kFile), &diag};
  const JsonPath root;
  EXPECT_TRUE(read_object(j, root.key("inputs").key("x"), ctx, kFields, found, nullptr));
  ASSERT_EQ(diag.size(), 2u) << diag.to_string();
  EXPECT_EQ(diag.items()[0].path, "$.inputs.x.dtyp");
  EXPECT_EQ(diag.items()[0].message, "unknown field 'dtyp'");
  EXPECT_EQ(diag.items()[0].hint, "did you mean 'dtype'?");
  EXPECT_EQ(diag.items()[1].path, "$.inputs.x.zzzz");
  EXPECT_EQ(diag.items()[1].hint, "expected one of: shape, dtype, description");
  EXPECT_EQ(found[1], nullptr);
}

TEST(ReadObject, NotAnObject) {
  const Json dummy = 1;
  const Json* found[3] = {&dummy, &dummy, &dummy};  // reset to null even on failure
  Diagnostics diag;
  ReadContext ctx{std::string(kFile), &diag};
  EXPECT_FALSE(read_object(json("\"text\""), JsonPath(), ctx, kFields, found, nullptr));
  EXPECT_TRUE(OnlyError(diag, {"$", "expected an object, found string \"text\""}));
  EXPECT_EQ(found[0], nullptr);
}

TEST(RequireField, ReportsAtTheParent) {
  Diagnostics diag;
  ReadContext ctx{std::string(kFile), &diag};
  const JsonPath root;
  const Json v = 1;
  EXPECT_TRUE(require_field(&v, "name", root, ctx));
  EXPECT_TRUE(diag.empty());
  EXPECT_FALSE(require_field(nullptr, "name", root.key("spec"), ctx));
  EXPECT_TRUE(OnlyError(diag, {"$.spec", "missing required field 'name'"}));
}

// ------------------------------------------------------------------ typed getters

class Getters : public ::testing::Test {
 protected:
  Diagnostics diag_;
  ReadContext ctx_{std::string(kFile), &diag_};
  const JsonPath root_;
  const JsonPath path_ = root_.key("v");
};

TEST_F(Getters, ReadString) {
  EXPECT_EQ(read_string(json(R"("abc")"), path_, ctx_), "abc");
  EXPECT_EQ(read_string(json(R"("")"), path_, ctx_), "");
  EXPECT_TRUE(diag_.empty());
  EXPECT_EQ(read_string(json(R"("")"), path_, ctx_, false), std::nullopt);
  EXPECT_TRUE(OnlyError(diag_, {"$.v", "expected a non-empty string, found \"\""}));
}

TEST_F(Getters, ReadStringWrongTypes) {
  EXPECT_EQ(read_string(json("[1, 2, 3]"), path_, ctx_), std::nullopt);
  EXPECT_TRUE(OnlyError(diag_, {"$.v", "expected a string, found array"}));
  Diagnostics d2;
  ReadContext c2{std::string(kFile), &d2};
  EXPECT_EQ(read_string(json("false"), path_, c2), std::nullopt);
  EXPECT_TRUE(OnlyError(d2, {"$.v", "expected a string, found boolean false"}));
}

TEST_F(Getters, ReadInt) {
  EXPECT_EQ(read_int(json("-5"), path_, ctx_), -5);
  EXPECT_EQ(read_int(json("9223372036854775807"), path_, ctx_),
            std::numeric_limits<std::int64_t>::max());
  EXPECT_TRUE(diag_.empty());
  EXPECT_EQ(read_int(json("9223372036854775808"), path_, ctx_), std::nullopt);
  EXPECT_TRUE(
      OnlyError(diag_, {"$.v", "integer 9223372036854775808 is out of range (at most 2^63-1)"}));
}

TEST_F(Getters, ReadIntWrongTypes) {
  EXPECT_EQ(read_int(json("3.0"), path_, ctx_), std::nullopt);
  EXPECT_EQ(read_int(json("true"), path_, ctx_), std::nullopt);
  EXPECT_EQ(read_int(json(R"({"a": 1})"), path_, ctx_), std::nullopt);
  ASSERT_EQ(diag_.size(), 3u);
  EXPECT_EQ(diag_.items()[0].message, "expected an integer, found number 3.0");
  EXPECT_EQ(diag_.items()[1].message, "expected an integer, found boolean true");
  EXPECT_EQ(diag_.items()[2].message, "expected an integer, found object");
}

TEST_F(Getters, ReadNumberAndBool) {
  EXPECT_EQ(read_number(json("3"), path_, ctx_), 3.0);
  EXPECT_EQ(read_number(json("-2.5"), path_, ctx_), -2.5);
  EXPECT_EQ(read_bool(json("false"), path_, ctx_), false);
  EXPECT_TRUE(diag_.empty());
  EXPECT_EQ(read_number(json(R"("3")"), path_, ctx_), std::nullopt);
  EXPECT_EQ(read_bool(json("1"), path_, ctx_), std::nullopt);
  EXPECT_EQ(read_bool(json("null"), path_, ctx_), std::nullopt);
  ASSERT_EQ(diag_.size(), 3u);
  EXPECT_EQ(diag_.items()[0].message, "expected a number, found string \"3\"");
  EXPECT_EQ(diag_.items()[1].message, "expected true or false, found integer 1");
  EXPECT_EQ(diag_.items()[2].message, "expected true or false, found null");
}

TEST_F(Getters, ReadStringListReportsEveryBadElement) {
  EXPECT_EQ(read_string_list(json(R"(["a", "b"])"), path_, ctx_),
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(read_string_list(json("[]"), path_, ctx_), std::vector<std::string>{});
  EXPECT_TRUE(diag_.empty());
  EXPECT_EQ(read_string_list(json(R"(["a", null, 2])"), path_, ctx_), std::nullopt);
  ASSERT_EQ(diag_.size(), 2u);
  EXPECT_EQ(diag_.items()[0].path, "$.v[1]");
  EXPECT_EQ(diag_.items()[0].message, "expected a string, found null");
  EXPECT_EQ(diag_.items()[1].path, "$.v[2]");
  EXPECT_EQ(diag_.items()[1].message, "expected a string, found integer 2");
}

TEST_F(Getters, ReadStringListNotAnArray) {
  EXPECT_EQ(read_string_list(json(R"({"a": "b"})"), path_, ctx_), std::nullopt);
  EXPECT_TRUE(OnlyError(diag_, {"$.v", "expected an array of strings, found object"}));
}

TEST_F(Getters, ExtendedNumbers) {
  EXPECT_EQ(read_extended_number(json("0.5"), path_, ctx_), 0.5);
  EXPECT_EQ(read_extended_number(json("2"), path_, ctx_), 2.0);
  EXPECT_TRUE(std::isnan(*read_extended_number(json(R"("NaN")"), path_, ctx_)));
  EXPECT_TRUE(std::isnan(*read_extended_number(json(R"("nan")"), path_, ctx_)));
  for (const char* s : {R"("Infinity")", R"("+Infinity")", R"("inf")"}) {
    EXPECT_EQ(read_extended_number(json(s), path_, ctx_), std::numeric_limits<double>::infinity())
        << s;
  }
  for (const char* s : {R"("-Infinity")", R"("-inf")"}) {
    EXPECT_EQ(read_extended_number(json(s), path_, ctx_), -std::numeric_limits<double>::infinity())
        << s;
  }
  EXPECT_TRUE(diag_.empty()) << diag_.to_string();
  EXPECT_EQ(read_extended_number(json(R"("Inf")"), path_, ctx_), std::nullopt);
  EXPECT_TRUE(OnlyError(
      diag_, {"$.v", "expected a number (or \"NaN\", \"Infinity\"), found string \"Inf\""}));
}

TEST(WriteExtendedNumber, NonFiniteAsStrings) {
  EXPECT_EQ(write_extended_number(std::numeric_limits<double>::quiet_NaN()), Json("NaN"));
  EXPECT_EQ(write_extended_number(std::numeric_limits<double>::infinity()), Json("Infinity"));
  EXPECT_EQ(write_extended_number(-std::numeric_limits<double>::infinity()), Json("-Infinity"));
  EXPECT_EQ(write_extended_number(0.25), Json(0.25));
  EXPECT_TRUE(write_extended_number(0.25).is_number_float());
}

TEST(ReadContext, WithoutDiagnosticsFindingsAreDropped) {
  ReadContext ctx{"x.json", nullptr};
  EXPECT_EQ(read_int(json("\"1\""), JsonPath(), ctx), std::nullopt);
  ctx.warning(JsonPath(), "ignored");
}

TEST(ReadContext, WarningsCarryFileAndPath) {
  Diagnostics diag;
  ReadContext ctx{"traces/a.jsonl:12", &diag};
  const JsonPath root;
  ctx.warning(root.key("evaluation"), "odd", "check it");
  ASSERT_EQ(diag.size(), 1u);
  EXPECT_EQ(diag.items()[0].severity, Severity::kWarning);
  EXPECT_EQ(diag.items()[0].to_string(),
            "traces/a.jsonl:12: $.evaluation: warning: odd (check it)");
}

// ------------------------------------------------------------------ json_kind / json_preview

TEST(JsonKind, EveryKind) {
  EXPECT_EQ(json_kind(json("null")), "null");
  EXPECT_EQ(json_kind(json("{}")), "object");
  EXPECT_EQ(json_kind(json("[]")), "array");
  EXPECT_EQ(json_kind(json("\"s\"")), "string");
  EXPECT_EQ(json_kind(json("true")), "boolean");
  EXPECT_EQ(json_kind(json("-1")), "integer");
  EXPECT_EQ(json_kind(json("18446744073709551615")), "integer");
  EXPECT_EQ(json_kind(json("1.5")), "number");
}

TEST(JsonPreview, ShortRenderings) {
  EXPECT_EQ(json_preview(json(R"({"a": 1})")), "{...}");
  EXPECT_EQ(json_preview(json("[1, 2, 3]")), "[...] (3 items)");
  EXPECT_EQ(json_preview(json("\"abc\"")), "\"abc\"");
  EXPECT_EQ(json_preview(json("12")), "12");
  const std::string long_text(70, 'x');
  EXPECT_EQ(json_preview(Json(long_text)), "\"" + std::string(56, 'x') + "...");
  EXPECT_EQ(json_preview(Json(std::string(58, 'y'))), "\"" + std::string(58, 'y') + "\"");
}

// ------------------------------------------------------------------ write_object

constexpr std::string_view kWriteFields[] = {"a", "b", "c", "d"};

TEST(WriteObject, RecordedOrderFirstThenListOrder) {
  Json values[4] = {1, 2, 3, 4};
  KeyOrder order;
  order.push(2);
  order.push(0);
  const bool always[4] = {false, false, false, false};
  EXPECT_EQ(write_object(kWriteFields, values, order, always).dump(),
            R"({"c":3,"a":1,"b":2,"d":4})");
}

TEST(WriteObject, NullIsWrittenOnlyWhereTheOriginalHadTheKeyOrItIsAlways) {
  Json values[4] = {1, nullptr, nullptr, nullptr};
  KeyOrder order;
  order.push(1);  // "b": null was in the original
  const bool always[4] = {false, false, false, true};
  // b: null (present before), a: 1, c: absent (null, not present, not always), d: null (always).
  EXPECT_EQ(write_object(kWriteFields, values, order, always).dump(),
            R"({"b":null,"a":1,"d":null})");
}

TEST(WriteObject, NoOrderNoNulls) {
  Json values[4] = {nullptr, "x", nullptr, Json::array()};
  const bool always[4] = {false, false, false, false};
  EXPECT_EQ(write_object(kWriteFields, values, KeyOrder(), always).dump(), R"({"b":"x","d":[]})");
}

}  // namespace
}  // namespace fib
