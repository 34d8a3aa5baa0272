// The small vocabularies of the trace module: "did you mean" suggestions, dtype names and sizes,
// and how findings are rendered.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/trace/dtype.h"
#include "fib/trace/suggest.h"

namespace fib {
namespace {

// ------------------------------------------------------------------ suggest

TEST(EditDistance, Levenshtein) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("same", "same"), 0u);
  EXPECT_EQ(edit_distance("bfloat61", "bfloat16"), 1u);  // an adjacent swap is one edit
  EXPECT_EQ(edit_distance("ab", "ba"), 1u);
  // A swapped pair beats two substitutions, so the suggestion is the intended dtype.
  const auto names = dtype_names();
  EXPECT_EQ(suggest("float61", names), "did you mean 'float16'?");
  EXPECT_EQ(edit_distance("Batch_Size", "batch_size"), 0u);  // case-insensitive
}

TEST(ClosestMatch, PicksThePlausibleTypo) {
  const std::vector<std::string> axes = {"batch_size", "num_pages", "head_dim", "head_dim_ckv"};
  EXPECT_EQ(closest_match("batch_sise", axes), "batch_size");
  EXPECT_EQ(closest_match("BATCH_SIZE", axes), "batch_size");
  EXPECT_EQ(closest_match("num_page", axes), "num_pages");
  EXPECT_EQ(closest_match("head_dims", axes), "head_dim");  // closer than head_dim_ckv
  EXPECT_EQ(closest_match("xyz", axes), "");
  EXPECT_EQ(closest_match("anything", std::vector<std::string>{}), "");
}

TEST(ClosestMatch, ContainmentCountsEvenWhenFar) {
  const std::vector<std::string> names = {"q", "kv_indptr", "sm_scale"};
  EXPECT_EQ(closest_match("kv", names), "kv_indptr");
  EXPECT_EQ(closest_match("scale", names), "sm_scale");
  EXPECT_EQ(closest_match("kv_indptr_buffer", names), "kv_indptr");
}

TEST(ClosestMatch, DistanceLimitIsAThirdOfTheLength) {
  // "abcdef" vs "abcxyz": distance 3 > 6 / 3 = 2.
  EXPECT_EQ(closest_match("abcdef", std::vector<std::string>{"abcxyz"}), "");
  // "abcdef" vs "abcdxy": distance 2 <= 2.
  EXPECT_EQ(closest_match("abcdef", std::vector<std::string>{"abcdxy"}), "abcdxy");
  // Short names still allow one edit.
  EXPECT_EQ(closest_match("q", std::vector<std::string>{"k"}), "k");
}

TEST(ClosestMatch, FirstOfEquallyCloseCandidatesWins) {
  EXPECT_EQ(closest_match("ab", std::vector<std::string>{"ac", "ad"}), "ac");
  EXPECT_EQ(closest_match("ab", std::vector<std::string>{"ad", "ac"}), "ad");
}

TEST(Suggest, DidYouMeanOrTheList) {
  const std::vector<std::string> names = {"random", "scalar", "safetensors"};
  EXPECT_EQ(suggest("randn", names), "did you mean 'random'?");
  EXPECT_EQ(suggest("zeros", names), "expected one of: random, scalar, safetensors");
  EXPECT_EQ(suggest("zeros", std::vector<std::string>{}), "");
  constexpr std::string_view views[] = {"const", "var"};
  EXPECT_EQ(suggest("constant", views), "did you mean 'const'?");
  EXPECT_EQ(suggest("static", views), "expected one of: const, var");
  EXPECT_EQ(closest_match("vr", views), "var");
}

TEST(Suggest, LongListsAreCutAfterTwelve) {
  std::vector<std::string> names;
  for (int i = 1; i <= 13; ++i) names.push_back("name" + std::to_string(i));
  EXPECT_EQ(suggest("zzzzzzzzzzzzzz", names),
            "expected one of: name1, name2, name3, name4, name5, name6, name7, name8, name9, "
            "name10, name11, name12, ...");
  names.pop_back();
  EXPECT_EQ(suggest("zzzzzzzzzzzzzz", names),
            "expected one of: name1, name2, name3, name4, name5, name6, name7, name8, name9, "
            "name10, name11, name12");
}

// ------------------------------------------------------------------ dtype

struct DTypeRow {
  DType type;
  std::string_view name;
  int bits;
  bool is_float;
  bool is_integer;
};

constexpr DTypeRow kDTypes[] = {
    {DType::kFloat32, "float32", 32, true, false},
    {DType::kFloat16, "float16", 16, true, false},
    {DType::kBFloat16, "bfloat16", 16, true, false},
    {DType::kFloat8E4M3FN, "float8_e4m3fn", 8, true, false},
    {DType::kFloat8E5M2, "float8_e5m2", 8, true, false},
    {DType::kFloat4E2M1, "float4_e2m1", 4, true, false},
    {DType::kInt64, "int64", 64, false, true},
    {DType::kInt32, "int32", 32, false, true},
    {DType::kInt16, "int16", 16, false, true},
    {DType::kInt8, "int8", 8, false, true},
    {DType::kUInt8, "uint8", 8, false, true},
    {DType::kBool, "bool", 8, false, false},
};

TEST(DType, NamesBitsAndKinds) {
  ASSERT_EQ(std::size(kDTypes), kAllDTypes.size());
  const auto names = dtype_names();
  for (std::size_t i = 0; i < kAllDTypes.size(); ++i) {
    const DTypeRow& r = kDTypes[i];
    SCOPED_TRACE(std::string(r.name));
    EXPECT_EQ(kAllDTypes[i], r.type);
    EXPECT_EQ(dtype_name(r.type), r.name);
    EXPECT_EQ(names[i], r.name);
    EXPECT_EQ(parse_dtype(r.name), r.type);
    EXPECT_EQ(dtype_bits(r.type), r.bits);
    EXPECT_EQ(dtype_is_float(r.type), r.is_float);
    EXPECT_EQ(dtype_is_integer(r.type), r.is_integer);
  }
}

TEST(DType, ParseIsExact) {
  for (const char* s : {"float", "Float32", "fp32", "bf16", "float8", "int", "bool ", ""}) {
    EXPECT_EQ(parse_dtype(s), std::nullopt) << s;
  }
}

TEST(DType, StorageBytes) {
  EXPECT_EQ(dtype_storage_bytes(DType::kFloat32, 10), 40u);
  EXPECT_EQ(dtype_storage_bytes(DType::kBFloat16, 3), 6u);
  EXPECT_EQ(dtype_storage_bytes(DType::kFloat8E4M3FN, 7), 7u);
  EXPECT_EQ(dtype_storage_bytes(DType::kBool, 7), 7u);
  EXPECT_EQ(dtype_storage_bytes(DType::kInt64, 0), 0u);
  // float4_e2m1 packs two elements per byte; an odd count rounds up.
  EXPECT_EQ(dtype_storage_bytes(DType::kFloat4E2M1, 0), 0u);
  EXPECT_EQ(dtype_storage_bytes(DType::kFloat4E2M1, 1), 1u);
  EXPECT_EQ(dtype_storage_bytes(DType::kFloat4E2M1, 3), 2u);
  EXPECT_EQ(dtype_storage_bytes(DType::kFloat4E2M1, 4), 2u);
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(dtype_storage_bytes(DType::kFloat4E2M1, kMax), std::uint64_t{1} << 63);
}

TEST(DType, StorageBytesOverflow) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  EXPECT_EQ(dtype_storage_bytes(DType::kUInt8, kMax), kMax);
  EXPECT_EQ(dtype_storage_bytes(DType::kInt64, (std::uint64_t{1} << 61) - 1),
            kMax - 7);  // 2^64 - 8
  EXPECT_EQ(dtype_storage_bytes(DType::kInt64, std::uint64_t{1} << 61), std::nullopt);
  EXPECT_EQ(dtype_storage_bytes(DType::kFloat16, std::uint64_t{1} << 63), std::nullopt);
  EXPECT_EQ(dtype_storage_bytes(DType::kFloat32, kMax / 3), std::nullopt);
}

// ------------------------------------------------------------------ diagnostics

TEST(Diagnostic, ToStringLeavesOutEmptyParts) {
  EXPECT_EQ((Diagnostic{Severity::kError, "a.json", "$.x", "bad", "try y"}).to_string(),
            "a.json: $.x: error: bad (try y)");
  EXPECT_EQ((Diagnostic{Severity::kWarning, "", "", "odd", ""}).to_string(), "warning: odd");
  EXPECT_EQ((Diagnostic{Severity::kInfo, "f.jsonl:3", "", "note", ""}).to_string(),
            "f.jsonl:3: info: note");
  EXPECT_EQ((Diagnostic{Severity::kError, "", "$", "m", "h"}).to_string(), "$: error: m (h)");
  EXPECT_EQ(severity_name(Severity::kInfo), "info");
  EXPECT_EQ(severity_name(Severity::kWarning), "warning");
  EXPECT_EQ(severity_name(Severity::kError), "error");
}

TEST(Diagnostics, CollectsCountsAndRenders) {
  Diagnostics d;
  EXPECT_TRUE(d.empty());
  EXPECT_FALSE(d.has_errors());
  EXPECT_EQ(d.to_string(), "");
  d.warning("a", "$.w", "w1");
  d.info("a", "", "i1");
  EXPECT_FALSE(d.has_errors());
  d.error("b", "$.e", "e1", "h1");
  EXPECT_TRUE(d.has_errors());
  EXPECT_EQ(d.size(), 3u);
  EXPECT_EQ(d.count(Severity::kError), 1u);
  EXPECT_EQ(d.count(Severity::kWarning), 1u);
  EXPECT_EQ(d.count(Severity::kInfo), 1u);
  EXPECT_EQ(d.to_string(), "a: $.w: warning: w1\na: info: i1\nb: $.e: error: e1 (h1)\n");

  Diagnostics more;
  more.error("c", "", "e2");
  d.append(more);
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(d.items().back().message, "e2");
  int n = 0;
  for (const auto& item : d) n += item.severity == Severity::kError ? 1 : 0;
  EXPECT_EQ(n, 2);
}

TEST(Error, WhatIsEveryFindingWithoutATrailingNewline) {
  Diagnostics d;
  d.error("x.json", "$.a", "first");
  d.error("x.json", "$.b", "second", "fix it");
  const Error e(d);
  EXPECT_STREQ(e.what(), "x.json: $.a: error: first\nx.json: $.b: error: second (fix it)");
  EXPECT_EQ(e.diagnostics().size(), 2u);

  const Error single("root", "dataset root not found", "pass --dataset");
  EXPECT_STREQ(single.what(), "root: error: dataset root not found (pass --dataset)");
  ASSERT_EQ(single.diagnostics().size(), 1u);
  EXPECT_EQ(single.diagnostics().items()[0].hint, "pass --dataset");

  const Error one(Diagnostic{Severity::kError, "f", "$.p", "m", ""});
  EXPECT_STREQ(one.what(), "f: $.p: error: m");
}

}  // namespace
}  // namespace fib
