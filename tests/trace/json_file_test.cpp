// Reading and writing JSON text: file errors (missing, directory, too large, link loop), parse
// errors with line and column, the nesting limit, and the pretty and one-line output formats.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fib/base/json.h"
#include "support/temp_dir.h"
#include "trace_test_util.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using trace_test::Contains;
using trace_test::json;

// The single finding of `diag`, which must be an error naming `file` with no JSON path.
Diagnostic only_file_error(const Diagnostics& diag, const std::string& file) {
  EXPECT_EQ(diag.size(), 1u) << diag.to_string();
  if (diag.empty()) return {};
  const Diagnostic& d = diag.items()[0];
  EXPECT_EQ(d.severity, Severity::kError);
  EXPECT_EQ(d.file, file);
  EXPECT_EQ(d.path, "");
  return d;
}

// ------------------------------------------------------------------ read_text_file

TEST(ReadTextFile, ReadsTheWholeFile) {
  fib::testing::TempDir dir;
  const std::string content =
      std::string("{\"a\": 1}\n") + std::string(200000, ' ') + std::string("\0x", 2);
  const auto path = dir.write("a.json", content);
  Diagnostics diag;
  EXPECT_EQ(read_text_file(path.string(), diag), content);
  EXPECT_TRUE(diag.empty());
}

TEST(ReadTextFile, MissingFile) {
  fib::testing::TempDir dir;
  const std::string path = (dir.path() / "missing.json").string();
  Diagnostics diag;
  EXPECT_EQ(read_text_file(path, diag), std::nullopt);
  const Diagnostic d = only_file_error(diag, path);
  EXPECT_EQ(d.message, "file not found");
  EXPECT_EQ(d.hint, "");
}

TEST(ReadTextFile, Directory) {
  fib::testing::TempDir dir;
  Diagnostics diag;
  EXPECT_EQ(read_text_file(dir.path().string(), diag), std::nullopt);
  EXPECT_EQ(only_file_error(diag, dir.path().string()).message, "is a directory, expected a file");
}

TEST(ReadTextFile, LargerThanTheLimit) {
  fib::testing::TempDir dir;
  const auto path = dir.write("big.json", "[1,2,3,4,5]");  // 11 bytes
  Diagnostics diag;
  EXPECT_EQ(read_text_file(path.string(), diag, 10), std::nullopt);
  EXPECT_EQ(only_file_error(diag, path.string()).message,
            "file is 11 bytes, larger than the 10 byte limit");
  Diagnostics ok;
  EXPECT_EQ(read_text_file(path.string(), ok, 11), "[1,2,3,4,5]");
  EXPECT_TRUE(ok.empty());
}

TEST(ReadTextFile, SymbolicLinkLoop) {
  fib::testing::TempDir dir;
  fs::create_symlink(dir.path() / "b", dir.path() / "a");
  fs::create_symlink(dir.path() / "a", dir.path() / "b");
  const std::string path = (dir.path() / "a").string();
  Diagnostics diag;
  EXPECT_EQ(read_text_file(path, diag), std::nullopt);
  const Diagnostic d = only_file_error(diag, path);
  EXPECT_EQ(d.message, "symbolic link loop");
  EXPECT_EQ(d.hint, "fix or remove the link");
}

TEST(ReadTextFile, FollowsAnOrdinarySymlink) {
  fib::testing::TempDir dir;
  dir.write("real.json", "{}");
  fs::create_symlink(dir.path() / "real.json", dir.path() / "link.json");
  Diagnostics diag;
  EXPECT_EQ(read_text_file((dir.path() / "link.json").string(), diag), "{}");
  EXPECT_TRUE(diag.empty());
}

// ------------------------------------------------------------------ parse_json

TEST(ParseJson, ValidTextKeepsKeyOrder) {
  Diagnostics diag;
  auto j = parse_json(R"({"z": 1, "a": [true, null], "m": {"y": 2, "b": 3}})", "f.json", diag);
  ASSERT_TRUE(j) << diag.to_string();
  EXPECT_EQ(j->dump(), R"({"z":1,"a":[true,null],"m":{"y":2,"b":3}})");
  EXPECT_TRUE(diag.empty());
}

TEST(ParseJson, ErrorOnTheFirstLineHasLineAndColumn) {
  Diagnostics diag;
  EXPECT_EQ(parse_json(R"({"a": ]})", "f.json", diag), std::nullopt);
  const Diagnostic d = only_file_error(diag, "f.json");
  EXPECT_EQ(d.message.rfind("line 1, column 7: invalid JSON: ", 0), 0u) << d.message;
  EXPECT_PRED_FORMAT2(Contains, d.message, "unexpected ']'");
  // nlohmann's own "[json.exception...] parse error at ..." prefix is dropped.
  EXPECT_EQ(d.message.find("json.exception"), std::string::npos) << d.message;
  EXPECT_EQ(d.message.find("parse error at"), std::string::npos) << d.message;
}

TEST(ParseJson, ErrorOnALaterLineCountsLinesAndColumns) {
  Diagnostics diag;
  EXPECT_EQ(parse_json("{\n  \"a\": 1,\n  \"b\": ]\n}\n", "defs/x.json", diag), std::nullopt);
  const Diagnostic d = only_file_error(diag, "defs/x.json");
  EXPECT_EQ(d.message.rfind("line 3, column 8: invalid JSON: ", 0), 0u) << d.message;
}

TEST(ParseJson, TrailingCommaAndEmptyText) {
  {
    Diagnostics diag;
    EXPECT_EQ(parse_json("{\n  \"name\": \"x\",\n}\n", "t.json", diag), std::nullopt);
    const Diagnostic d = only_file_error(diag, "t.json");
    EXPECT_EQ(d.message.rfind("line 3, column 1: invalid JSON: ", 0), 0u) << d.message;
  }
  {
    Diagnostics diag;
    EXPECT_EQ(parse_json("", "e.json", diag), std::nullopt);
    const Diagnostic d = only_file_error(diag, "e.json");
    EXPECT_EQ(d.message.rfind("line 1, column 1: invalid JSON: ", 0), 0u) << d.message;
  }
}

TEST(ParseJson, NestingUpToTheLimitIsAccepted) {
  const std::string text = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  Diagnostics diag;
  EXPECT_TRUE(parse_json(text, "deep.json", diag)) << diag.to_string();
}

TEST(ParseJson, NestingDeeperThanTheLimitIsRefused) {
  const std::string text =
      "\n" + std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  Diagnostics diag;
  EXPECT_EQ(parse_json(text, "deep.json", diag), std::nullopt);
  EXPECT_EQ(only_file_error(diag, "deep.json").message,
            "line 2, column 257: JSON nests deeper than 256 levels");
}

TEST(ParseJson, BracketsInsideStringsDoNotCountAsNesting) {
  const std::string text = "[\"" + std::string(300, '[') + "\\\"" + std::string(300, '{') + "\"]";
  Diagnostics diag;
  auto j = parse_json(text, "s.json", diag);
  ASSERT_TRUE(j) << diag.to_string();
  EXPECT_EQ((*j)[0].get<std::string>().size(), 601u);
}

TEST(ReadJsonFile, ReadsParsesAndNamesTheFile) {
  fib::testing::TempDir dir;
  const auto good = dir.write("good.json", "{\"a\": [1, 2]}\n");
  Diagnostics diag;
  auto j = read_json_file(good.string(), diag);
  ASSERT_TRUE(j) << diag.to_string();
  EXPECT_EQ((*j)["a"][1], 2);

  const auto bad = dir.write("bad.json", "{\"a\": [1, 2}\n");
  Diagnostics diag2;
  EXPECT_EQ(read_json_file(bad.string(), diag2), std::nullopt);
  EXPECT_EQ(
      only_file_error(diag2, bad.string()).message.rfind("line 1, column 12: invalid JSON: ", 0),
      0u)
      << diag2.to_string();

  Diagnostics diag3;
  const std::string missing = (dir.path() / "none.json").string();
  EXPECT_EQ(read_json_file(missing, diag3), std::nullopt);
  EXPECT_EQ(only_file_error(diag3, missing).message, "file not found");
}

// ------------------------------------------------------------------ output formats

TEST(DumpJson, PrettyAndLine) {
  const Json j = json(R"({"b": [1, 2], "a": {"x": null}})");
  EXPECT_EQ(dump_json_pretty(j),
            "{\n  \"b\": [\n    1,\n    2\n  ],\n  \"a\": {\n    \"x\": null\n  }\n}\n");
  EXPECT_EQ(dump_json_line(j), R"({"b":[1,2],"a":{"x":null}})");
}

TEST(DumpJson, InvalidUtf8IsReplacedNotThrown) {
  const Json j = std::string("a\xff");
  EXPECT_EQ(dump_json_line(j), "\"a\xef\xbf\xbd\"");
  EXPECT_EQ(dump_json_pretty(j), "\"a\xef\xbf\xbd\"\n");
}

}  // namespace
}  // namespace fib
