// safetensors header parsing from bytes built in the test: a valid file, the dtype table, and
// every malformed case with its exact message and JSON path.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fib/tensor/safetensors_header.h"
#include "fib/trace/dtype.h"
#include "safetensors_bytes.h"

namespace fib {
namespace {

using testing::le64;
using testing::safetensors_bytes;

constexpr char kFile[] = "t.safetensors";

struct Parsed {
  std::optional<SafetensorsHeader> header;
  Diagnostics diag;
};

Parsed parse_bytes(const std::string& bytes) {
  Parsed p;
  p.header = parse_safetensors_header(bytes, bytes.size(), kFile, p.diag);
  return p;
}
Parsed parse(std::string_view header, std::uint64_t data_bytes) {
  return parse_bytes(safetensors_bytes(header, data_bytes));
}

// Expects the parse to fail with exactly one error at `path` saying `message`.
void expect_error(const Parsed& p, std::string_view path, std::string_view message) {
  EXPECT_FALSE(p.header) << "parsed although invalid";
  ASSERT_EQ(p.diag.size(), 1u) << p.diag.to_string();
  const Diagnostic& d = p.diag.items()[0];
  EXPECT_EQ(d.severity, Severity::kError);
  EXPECT_EQ(d.file, kFile);
  EXPECT_EQ(d.path, path);
  EXPECT_EQ(d.message, message);
}

void expect_error(std::string_view header, std::uint64_t data_bytes, std::string_view path,
                  std::string_view message) {
  SCOPED_TRACE(std::string(header));
  expect_error(parse(header, data_bytes), path, message);
}

constexpr char kTwoTensors[] = R"({"__metadata__":{"format":"pt","source":"fib test"},)"
                               R"("weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                               R"("ids":{"dtype":"I32","shape":[4],"data_offsets":[24,40]}})";

TEST(SafetensorsHeader, ParsesTwoTensorsAndMetadata) {
  const Parsed p = parse(kTwoTensors, 40);
  ASSERT_TRUE(p.header) << p.diag.to_string();
  EXPECT_TRUE(p.diag.empty());
  const SafetensorsHeader& h = *p.header;
  EXPECT_EQ(h.header_bytes, std::string_view(kTwoTensors).size());
  EXPECT_EQ(h.data_bytes, 40u);
  EXPECT_EQ(h.data_offset(), 8 + h.header_bytes);
  ASSERT_EQ(h.tensors.size(), 2u);
  // Header order, not offset or name order.
  const SafetensorsEntry& w = h.tensors[0];
  EXPECT_EQ(w.name, "weight");
  EXPECT_EQ(w.dtype_code, "F32");
  EXPECT_EQ(w.dtype, DType::kFloat32);
  EXPECT_EQ(w.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(w.begin, 0u);
  EXPECT_EQ(w.end, 24u);
  const SafetensorsEntry& ids = h.tensors[1];
  EXPECT_EQ(ids.name, "ids");
  EXPECT_EQ(ids.dtype_code, "I32");
  EXPECT_EQ(ids.dtype, DType::kInt32);
  EXPECT_EQ(ids.shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(ids.begin, 24u);
  EXPECT_EQ(ids.end, 40u);
  EXPECT_EQ(h.metadata, (std::vector<std::pair<std::string, std::string>>{{"format", "pt"},
                                                                          {"source", "fib test"}}));
  EXPECT_EQ(h.find("ids"), &h.tensors[1]);
  EXPECT_EQ(h.find("weight"), &h.tensors[0]);
  EXPECT_EQ(h.find("__metadata__"), nullptr);
  EXPECT_EQ(h.find("Weight"), nullptr);
}

TEST(SafetensorsHeader, DtypeTable) {
  const std::vector<std::pair<std::string_view, std::optional<DType>>> table = {
      {"F32", DType::kFloat32},
      {"F16", DType::kFloat16},
      {"BF16", DType::kBFloat16},
      {"F8_E4M3", DType::kFloat8E4M3FN},
      {"F8_E5M2", DType::kFloat8E5M2},
      {"F4", DType::kFloat4E2M1},
      {"I64", DType::kInt64},
      {"I32", DType::kInt32},
      {"I16", DType::kInt16},
      {"I8", DType::kInt8},
      {"U8", DType::kUInt8},
      {"BOOL", DType::kBool},
      // Known to the format but not FlashInfer-Trace dtypes.
      {"F64", std::nullopt},
      {"U16", std::nullopt},
      {"U32", std::nullopt},
      {"U64", std::nullopt},
      {"F8_E8M0", std::nullopt},
      {"F8_E4M3FNUZ", std::nullopt},
      {"F8_E5M2FNUZ", std::nullopt},
      {"F6_E2M3", std::nullopt},
      {"F6_E3M2", std::nullopt},
      {"C64", std::nullopt},
      // Not codes at all.
      {"f32", std::nullopt},
      {"float32", std::nullopt},
      {"", std::nullopt},
      {"F8_E4M3FN", std::nullopt},
  };
  for (const auto& [code, dtype] : table) {
    EXPECT_EQ(dtype_from_safetensors(code), dtype) << code;
  }
  EXPECT_EQ(dtype_name(*dtype_from_safetensors("F8_E4M3")), "float8_e4m3fn");
  EXPECT_EQ(dtype_name(*dtype_from_safetensors("F4")), "float4_e2m1");
  // Every fib dtype has a code, and it maps back.
  for (DType t : kAllDTypes) {
    const std::string_view code = safetensors_code(t);
    EXPECT_NE(code, "?") << dtype_name(t);
    EXPECT_EQ(dtype_from_safetensors(code), t) << code;
  }
  EXPECT_EQ(safetensors_code(DType::kBFloat16), "BF16");
  EXPECT_EQ(safetensors_code(DType::kFloat8E4M3FN), "F8_E4M3");
}

TEST(SafetensorsHeader, ByteSizesFollowTheDtype) {
  // BF16 [3] = 6 bytes, U8 [5] = 5, F8_E4M3 [2,2] = 4, F4 [2,4] = 4 (two per byte), BOOL [3]
  // = 3, F64 [1] = 8, F8_E4M3FNUZ [2] = 2, C64 [1] = 8, a 0-D tensor, an empty tensor.
  const std::string header = R"({"b":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},)"
                             R"("u":{"dtype":"U8","shape":[5],"data_offsets":[6,11]},)"
                             R"("f8":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[11,15]},)"
                             R"("f4":{"dtype":"F4","shape":[2,4],"data_offsets":[15,19]},)"
                             R"("mask":{"dtype":"BOOL","shape":[3],"data_offsets":[19,22]},)"
                             R"("d":{"dtype":"F64","shape":[1],"data_offsets":[22,30]},)"
                             R"("nuz":{"dtype":"F8_E4M3FNUZ","shape":[2],"data_offsets":[30,32]},)"
                             R"("c":{"dtype":"C64","shape":[1],"data_offsets":[32,40]},)"
                             R"("scalar":{"dtype":"I64","shape":[],"data_offsets":[40,48]},)"
                             R"("empty":{"dtype":"F32","shape":[0,7],"data_offsets":[48,48]}})";
  const Parsed p = parse(header, 48);
  ASSERT_TRUE(p.header) << p.diag.to_string();
  const SafetensorsHeader& h = *p.header;
  ASSERT_EQ(h.tensors.size(), 10u);
  EXPECT_EQ(h.find("b")->dtype, DType::kBFloat16);
  EXPECT_EQ(h.find("u")->dtype, DType::kUInt8);
  EXPECT_EQ(h.find("f8")->dtype, DType::kFloat8E4M3FN);
  EXPECT_EQ(h.find("f4")->dtype, DType::kFloat4E2M1);
  EXPECT_EQ(h.find("f4")->shape, (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(h.find("mask")->dtype, DType::kBool);
  EXPECT_EQ(h.find("d")->dtype, std::nullopt);
  EXPECT_EQ(h.find("d")->dtype_code, "F64");
  EXPECT_EQ(h.find("nuz")->dtype, std::nullopt);
  EXPECT_EQ(h.find("c")->dtype_code, "C64");
  EXPECT_TRUE(h.find("scalar")->shape.empty());
  EXPECT_EQ(h.find("empty")->shape, (std::vector<std::int64_t>{0, 7}));
  EXPECT_EQ(h.find("empty")->begin, 48u);
  EXPECT_EQ(h.find("empty")->end, 48u);

  // F4 takes half a byte per element: [2,4] in 8 bytes is wrong.
  expect_error(R"({"f4":{"dtype":"F4","shape":[2,4],"data_offsets":[0,8]}})", 8,
               "$.f4.data_offsets", "holds 8 bytes but shape [2,4] of F4 needs 4");
}

TEST(SafetensorsHeader, EmptyHeaderObjectAndPaddingAreValid) {
  const Parsed empty = parse("{}", 0);
  ASSERT_TRUE(empty.header) << empty.diag.to_string();
  EXPECT_TRUE(empty.header->tensors.empty());
  EXPECT_TRUE(empty.header->metadata.empty());
  EXPECT_EQ(empty.header->data_bytes, 0u);
  // Writers pad the header with spaces to align the data.
  const std::string padded =
      R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})" + std::string(5, ' ');
  const Parsed p = parse(padded, 2);
  ASSERT_TRUE(p.header) << p.diag.to_string();
  EXPECT_EQ(p.header->header_bytes, padded.size());
  EXPECT_EQ(p.header->data_offset(), 8 + padded.size());
}

TEST(SafetensorsHeaderErrors, FileShorterThanTheLengthPrefix) {
  expect_error(parse_bytes("abcde"), "",
               "not a safetensors file: 5 bytes, shorter than the 8-byte header length");
  expect_error(parse_bytes(""), "",
               "not a safetensors file: 0 bytes, shorter than the 8-byte header length");
}

TEST(SafetensorsHeaderErrors, HeaderLengthPastTheEndOfTheFile) {
  const std::string bytes = le64(100) + "{}";
  expect_error(parse_bytes(bytes), "", "header length 100 runs past the end of the 10-byte file");
  // One byte too long is still too long.
  expect_error(parse_bytes(le64(3) + "{}"), "",
               "header length 3 runs past the end of the 10-byte file");
}

TEST(SafetensorsHeaderErrors, HeaderLengthOverTheLimit) {
  const std::uint64_t over = kMaxSafetensorsHeaderBytes + 1;
  Parsed p;
  const std::string prefix = le64(over) + "{}";
  p.header = parse_safetensors_header(prefix, over * 2, kFile, p.diag);  // a big enough file
  expect_error(p, "",
               "header length 104857601 exceeds the 104857600 byte limit (corrupt or not a "
               "safetensors file)");
  // A length near 2^64 must not wrap around the end-of-file check.
  expect_error(parse_bytes(le64(~std::uint64_t{0}) + "{}"), "",
               "header length 18446744073709551615 exceeds the 104857600 byte limit (corrupt or "
               "not a safetensors file)");
}

TEST(SafetensorsHeaderErrors, PrefixShorterThanTheHeader) {
  Parsed p;
  const std::string bytes = safetensors_bytes("{}", 0);
  p.header =
      parse_safetensors_header(std::string_view(bytes).substr(0, 9), bytes.size(), kFile, p.diag);
  expect_error(p, "", "header is truncated");
}

TEST(SafetensorsHeaderErrors, HeaderMustStartWithABrace) {
  expect_error("[1, 2]", 0, "", "header does not start with '{'");
  expect_error(" {}", 0, "", "header does not start with '{'");
  expect_error("", 0, "", "header does not start with '{'");
  expect_error("    ", 0, "", "header does not start with '{'");
}

TEST(SafetensorsHeaderErrors, InvalidJson) {
  const Parsed p = parse(R"({"x": })", 0);
  EXPECT_FALSE(p.header);
  ASSERT_EQ(p.diag.size(), 1u) << p.diag.to_string();
  const Diagnostic& d = p.diag.items()[0];
  EXPECT_EQ(d.file, "t.safetensors (header)");
  EXPECT_TRUE(d.message.starts_with("line 1, column 7: invalid JSON: ")) << d.message;
  // Trailing garbage after the object is invalid too.
  EXPECT_FALSE(parse("{} x", 0).header);
}

TEST(SafetensorsHeaderErrors, EntriesMustBeObjects) {
  expect_error(R"({"x":5})", 0, "$.x",
               "expected an object {dtype, shape, data_offsets}, found integer");
  expect_error(R"({"x":[0,4]})", 4, "$.x",
               "expected an object {dtype, shape, data_offsets}, found array");
  expect_error(R"({"x":"F32"})", 0, "$.x",
               "expected an object {dtype, shape, data_offsets}, found string");
  // Names that are not plain identifiers are quoted in the path.
  expect_error(R"({"model.layers.0.w":null})", 0, R"($["model.layers.0.w"])",
               "expected an object {dtype, shape, data_offsets}, found null");
}

TEST(SafetensorsHeaderErrors, MissingOrMistypedFields) {
  expect_error(R"({"x":{"shape":[1],"data_offsets":[0,4]}})", 4, "$.x",
               "missing or non-string 'dtype'");
  expect_error(R"({"x":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 4, "$.x",
               "missing or non-string 'dtype'");
  expect_error(R"({"x":{"dtype":"F32","data_offsets":[0,4]}})", 4, "$.x",
               "missing or non-array 'shape'");
  expect_error(R"({"x":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", 4, "$.x",
               "missing or non-array 'shape'");
  const char kOffsets[] = "'data_offsets' must be [begin, end] with non-negative integers";
  expect_error(R"({"x":{"dtype":"F32","shape":[1]}})", 4, "$.x", kOffsets);
  expect_error(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", 4, "$.x", kOffsets);
  expect_error(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 4, "$.x", kOffsets);
  expect_error(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4, "$.x", kOffsets);
  expect_error(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}})", 4, "$.x", kOffsets);
  expect_error(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":{"begin":0,"end":4}}})", 4, "$.x",
               kOffsets);
  expect_error(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})", 4, "$.x",
               "unknown field 'extra' in tensor entry");
}

TEST(SafetensorsHeaderErrors, UnknownDtypeCode) {
  expect_error(R"({"x":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})", 4, "$.x.dtype",
               "unknown safetensors dtype 'F12'");
  expect_error(R"({"x":{"dtype":"float32","shape":[1],"data_offsets":[0,4]}})", 4, "$.x.dtype",
               "unknown safetensors dtype 'float32'");
}

TEST(SafetensorsHeaderErrors, DimensionsMustBeNonNegativeIntegers) {
  expect_error(R"({"x":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,0]}})", 0, "$.x.shape",
               "dimension -1 is not a non-negative integer");
  expect_error(R"({"x":{"dtype":"F32","shape":[2.5],"data_offsets":[0,0]}})", 0, "$.x.shape",
               "dimension 2.5 is not a non-negative integer");
  expect_error(R"({"x":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8, "$.x.shape",
               "dimension 2.0 is not a non-negative integer");
  expect_error(R"({"x":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8, "$.x.shape",
               "dimension \"2\" is not a non-negative integer");
  expect_error(R"({"x":{"dtype":"F32","shape":[null],"data_offsets":[0,0]}})", 0, "$.x.shape",
               "dimension null is not a non-negative integer");
}

TEST(SafetensorsHeaderErrors, ElementCountOverflow) {
  // 2^32 * 2^32 = 2^64 does not fit.
  expect_error(R"({"x":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0,
               "$.x.shape", "the element count overflows 64 bits");
  // A single dimension above INT64_MAX cannot be an int64 shape.
  expect_error(R"({"x":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,0]}})", 0,
               "$.x.shape", "the element count overflows 64 bits");
  // The count fits but its size in bits does not.
  expect_error(R"({"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0,
               "$.x", "the byte size overflows 64 bits");
}

TEST(SafetensorsHeaderErrors, OffsetsOutOfOrderOrPastTheData) {
  expect_error(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8, "$.x.data_offsets",
               "begin 8 is after end 4");
  expect_error(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, "$.x.data_offsets",
               "end 8 lies past the data section (4 bytes)");
  expect_error(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})", 4,
               "$.x.data_offsets", "end 18446744073709551615 lies past the data section (4 bytes)");
}

TEST(SafetensorsHeaderErrors, ByteSizeMustMatchShapeAndDtype) {
  expect_error(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20,
               "$.w.data_offsets", "holds 20 bytes but shape [2,3] of F32 needs 24");
  expect_error(R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,16]}})", 16,
               "$.w.data_offsets", "holds 16 bytes but shape [4] of BF16 needs 8");
  expect_error(R"({"s":{"dtype":"I32","shape":[],"data_offsets":[0,0]}})", 0, "$.s.data_offsets",
               "holds 0 bytes but shape [] of I32 needs 4");
}

TEST(SafetensorsHeaderErrors, OverlappingTensors) {
  expect_error(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
               R"("b":{"dtype":"I32","shape":[4],"data_offsets":[8,24]}})",
               24, "$.b", "data [8, 24) overlaps another tensor");
  // The same range twice.
  expect_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
               R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
               4, "$.b", "data [0, 4) overlaps another tensor");
}

TEST(SafetensorsHeaderErrors, HoleBetweenTensors) {
  expect_error(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
               R"("b":{"dtype":"I32","shape":[4],"data_offsets":[28,44]}})",
               44, "$.b", "bytes [24, 28) before it belong to no tensor");
  // A hole before the first tensor.
  expect_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", 8, "$.a",
               "bytes [0, 4) before it belong to no tensor");
}

TEST(SafetensorsHeaderErrors, TrailingUnusedBytes) {
  expect_error(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", 30, "",
               "the last 6 bytes of the data section belong to no tensor");
  expect_error("{}", 3, "", "the last 3 bytes of the data section belong to no tensor");
}

TEST(SafetensorsHeaderErrors, MetadataValuesMustBeStrings) {
  expect_error(R"({"__metadata__":{"format":"pt","step":3}})", 0, "$.__metadata__.step",
               "metadata values must be strings");
  expect_error(R"({"__metadata__":["format","pt"]})", 0, "$.__metadata__",
               "__metadata__ must be an object of string -> string");
}

TEST(SafetensorsHeaderErrors, EveryBadEntryIsReported) {
  const Parsed p = parse(R"({"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]},)"
                         R"("ok":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[-2],"data_offsets":[0,4]},)"
                         R"("__metadata__":{"n":1}})",
                         4);
  EXPECT_FALSE(p.header);
  ASSERT_EQ(p.diag.size(), 3u) << p.diag.to_string();
  EXPECT_EQ(p.diag.items()[0].path, "$.a.dtype");
  EXPECT_EQ(p.diag.items()[1].path, "$.b.shape");
  EXPECT_EQ(p.diag.items()[2].path, "$.__metadata__.n");
  EXPECT_EQ(p.diag.to_string(),
            "t.safetensors: $.a.dtype: error: unknown safetensors dtype 'F99'\n"
            "t.safetensors: $.b.shape: error: dimension -2 is not a non-negative integer\n"
            "t.safetensors: $.__metadata__.n: error: metadata values must be strings\n");
}

}  // namespace
}  // namespace fib
