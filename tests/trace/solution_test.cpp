// solution_from_json: fields, the entry point `file::symbol`, safe and unique source paths,
// languages and bindings; one failing example per rule with its exact path, message and hint.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fib/trace/solution.h"
#include "trace_test_util.h"

namespace fib {
namespace {

using trace_test::Expected;
using trace_test::HasError;
using trace_test::json;
using trace_test::kFile;
using trace_test::OnlyError;

constexpr std::string_view kSolution = R"({
  "name": "paged_decode_cuda_v1",
  "definition": "paged_decode_test",
  "author": "tester",
  "spec": {
    "language": "cuda",
    "target_hardware": ["NVIDIA_H100"],
    "entry_point": "kernel.cu::run",
    "dependencies": ["cutlass"],
    "destination_passing_style": false,
    "binding": "tvm-ffi"
  },
  "sources": [
    {"path": "kernel.cu", "content": "extern \"C\" void run() {}\n"},
    {"path": "include/util.h", "content": "#pragma once\n"}
  ],
  "description": "A test solution."
})";

std::optional<Solution> read(const Json& j, Diagnostics& diag) {
  ReadContext ctx{std::string(kFile), &diag};
  return solution_from_json(j, ctx);
}

TEST(SolutionFromJson, ValidSolutionFields) {
  Diagnostics diag;
  auto s = read(json(kSolution), diag);
  ASSERT_TRUE(s) << diag.to_string();
  EXPECT_TRUE(diag.empty());
  EXPECT_EQ(s->name, "paged_decode_cuda_v1");
  EXPECT_EQ(s->definition, "paged_decode_test");
  EXPECT_EQ(s->author, "tester");
  EXPECT_EQ(s->description, "A test solution.");
  EXPECT_EQ(s->spec.language, "cuda");
  EXPECT_EQ(s->spec.target_hardware, std::vector<std::string>{"NVIDIA_H100"});
  EXPECT_EQ(s->spec.entry_point, "kernel.cu::run");
  EXPECT_EQ(s->spec.entry_file(), "kernel.cu");
  EXPECT_EQ(s->spec.entry_symbol(), "run");
  EXPECT_EQ(s->spec.dependencies, std::vector<std::string>{"cutlass"});
  EXPECT_EQ(s->spec.destination_passing_style, false);
  EXPECT_FALSE(s->spec.dps());
  EXPECT_EQ(s->spec.binding, "tvm-ffi");
  ASSERT_EQ(s->sources.size(), 2u);
  EXPECT_EQ(s->sources[1].path, "include/util.h");
  ASSERT_NE(s->source("kernel.cu"), nullptr);
  EXPECT_EQ(s->source("kernel.cu")->content, "extern \"C\" void run() {}\n");
  EXPECT_EQ(s->source("util.h"), nullptr);
}

TEST(SolutionFromJson, RoundTripKeepsKeyOrder) {
  const Json j = json(kSolution);
  Diagnostics diag;
  auto s = read(j, diag);
  ASSERT_TRUE(s) << diag.to_string();
  EXPECT_EQ(to_json(*s).dump(), j.dump());

  // Another key order, and a null binding, survive too.
  const Json k = json(R"({
    "sources": [{"content": "def run(x):\n    return x\n", "path": "main.py"}],
    "spec": {"entry_point": "main.py::run", "binding": null, "language": "python",
             "target_hardware": []},
    "author": "a", "definition": "d", "name": "n"
  })");
  Diagnostics diag2;
  auto t = read(k, diag2);
  ASSERT_TRUE(t) << diag2.to_string();
  EXPECT_FALSE(t->spec.binding.has_value());
  EXPECT_EQ(to_json(*t).dump(), k.dump());
}

TEST(SolutionFromJson, DestinationPassingStyleDefaultsToTrue) {
  Diagnostics diag;
  auto s = read(json(R"({
    "name": "n", "definition": "d", "author": "a",
    "spec": {"language": "python", "entry_point": "main.py::run"},
    "sources": [{"path": "main.py", "content": "def run(x): pass\n"}]
  })"),
                diag);
  ASSERT_TRUE(s) << diag.to_string();
  EXPECT_FALSE(s->spec.destination_passing_style.has_value());
  EXPECT_TRUE(s->spec.dps());
  EXPECT_FALSE(s->spec.binding.has_value());
  EXPECT_TRUE(s->spec.target_hardware.empty());
}

// ------------------------------------------------------------------ entry point

class BadEntryPoint : public ::testing::TestWithParam<const char*> {};

TEST_P(BadEntryPoint, IsNotFileColonColonSymbol) {
  Json j = json(kSolution);
  j["spec"]["entry_point"] = GetParam();
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.spec.entry_point",
             std::string("entry point '") + GetParam() + "' is not of the form 'file::symbol'",
             "e.g. \"kernel.cu::run\""}));
}

INSTANTIATE_TEST_SUITE_P(Forms, BadEntryPoint,
                         ::testing::Values("kernel.cu",           // no ::
                                           "kernel.cu:run",       // a single colon
                                           "kernel.cu::run::x",   // two ::
                                           "::run",               // empty file
                                           "kernel.cu::",         // empty symbol
                                           "kernel.cu::::run"));  // two :: back to back

TEST(SolutionFromJson, EntryPointEmpty) {
  Json j = json(kSolution);
  j["spec"]["entry_point"] = "";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.spec.entry_point", "expected a non-empty string, found \"\""}));
}

TEST(SolutionFromJson, EntryFileNotAmongSourcesSuggests) {
  Json j = json(kSolution);
  j["spec"]["entry_point"] = "kernal.cu::run";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.spec.entry_point", "entry point file 'kernal.cu' is not among the sources",
             "did you mean 'kernel.cu'?"}));
}

TEST(SolutionFromJson, EntryFileNotAmongSourcesListsThem) {
  Json j = json(kSolution);
  j["spec"]["entry_point"] = "main.py::run";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(
      OnlyError(diag, {"$.spec.entry_point", "entry point file 'main.py' is not among the sources",
                       "expected one of: kernel.cu, include/util.h"}));
}

TEST(SolutionFromJson, EntryFileInASubfolder) {
  Json j = json(kSolution);
  j["spec"]["entry_point"] = "include/util.h::helper";
  Diagnostics diag;
  auto s = read(j, diag);
  ASSERT_TRUE(s) << diag.to_string();
  EXPECT_EQ(s->spec.entry_file(), "include/util.h");
  EXPECT_EQ(s->spec.entry_symbol(), "helper");
}

// ------------------------------------------------------------------ source paths

struct PathCase {
  const char* label;
  const char* path;
  const char* why;
};
void PrintTo(const PathCase& c, std::ostream* os) { *os << c.label; }

class UnsafeSourcePath : public ::testing::TestWithParam<PathCase> {};

TEST_P(UnsafeSourcePath, IsRefusedWithTheReason) {
  const PathCase& c = GetParam();
  Json j = json(kSolution);
  j["sources"][1]["path"] = c.path;
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(
      diag, {"$.sources[1].path", std::string("unsafe source path '") + c.path + "': " + c.why,
             "use a relative path inside the solution, e.g. \"src/kernel.cu\""}));
  std::string why;
  EXPECT_FALSE(is_safe_relative_path(c.path, &why));
  EXPECT_EQ(why, c.why);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, UnsafeSourcePath,
    ::testing::Values(
        PathCase{"Absolute", "/etc/passwd", "the path is absolute"},
        PathCase{"ParentAtStart", "../kernel.cu", "the path climbs out of its folder with '..'"},
        PathCase{"ParentInside", "include/../../x.h",
                 "the path climbs out of its folder with '..'"},
        PathCase{"ParentAtEnd", "include/..", "the path climbs out of its folder with '..'"},
        PathCase{"DotComponent", "./x.h", "the path has an empty or '.' component"},
        PathCase{"DotInside", "include/./x.h", "the path has an empty or '.' component"},
        PathCase{"EmptyComponent", "include//x.h", "the path has an empty or '.' component"},
        PathCase{"TrailingSlash", "include/", "the path has an empty or '.' component"},
        PathCase{"Backslash", "include\\x.h", "the path contains a backslash"},
        PathCase{"WindowsParent", "..\\x.h", "the path contains a backslash"}),
    [](const ::testing::TestParamInfo<PathCase>& p) { return std::string(p.param.label); });

TEST(IsSafeRelativePath, AcceptsOrdinaryRelativePaths) {
  for (const char* p : {"kernel.cu", "src/kernel.cu", "a/b/c/d.h", ".hidden", "a/.b", "..a", "a..",
                        "a/...", "with space.cu"}) {
    std::string why = "unchanged";
    EXPECT_TRUE(is_safe_relative_path(p, &why)) << p << ": " << why;
    EXPECT_EQ(why, "unchanged") << p;
  }
}

TEST(IsSafeRelativePath, EmptyAndNulAndNullReason) {
  std::string why;
  EXPECT_FALSE(is_safe_relative_path("", &why));
  EXPECT_EQ(why, "the path is empty");
  EXPECT_FALSE(is_safe_relative_path(std::string_view("a\0b", 3), &why));
  EXPECT_EQ(why, "the path contains a NUL byte");
  EXPECT_FALSE(is_safe_relative_path(".", nullptr));
  EXPECT_FALSE(is_safe_relative_path("..", nullptr));
}

TEST(SolutionFromJson, EmptySourcePath) {
  Json j = json(kSolution);
  j["sources"][1]["path"] = "";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.sources[1].path", "expected a non-empty string, found \"\""}));
}

TEST(SolutionFromJson, DuplicateSourcePath) {
  Json j = json(kSolution);
  j["sources"][1]["path"] = "kernel.cu";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.sources[1].path", "duplicate source path 'kernel.cu'"}));
}

TEST(SolutionFromJson, EmptyContent) {
  Json j = json(kSolution);
  j["sources"][1]["content"] = "";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.sources[1].content", "expected a non-empty string, found \"\""}));
}

TEST(SolutionFromJson, SourceWithoutContent) {
  Json j = json(kSolution);
  j["sources"][0].erase("content");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.sources[0]", "missing required field 'content'"}));
}

TEST(SolutionFromJson, SourceWithMisspelledContent) {
  Json j = json(kSolution);
  j["sources"][0]["contents"] = j["sources"][0]["content"];
  j["sources"][0].erase("content");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_EQ(diag.size(), 2u) << diag.to_string();
  EXPECT_TRUE(HasError(
      diag, {"$.sources[0].contents", "unknown field 'contents'", "did you mean 'content'?"}));
  EXPECT_TRUE(HasError(diag, {"$.sources[0]", "missing required field 'content'"}));
}

TEST(SolutionFromJson, EmptySources) {
  Json j = json(kSolution);
  j["sources"] = Json::array();
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.sources", "a solution needs at least one source file"}));
}

TEST(SolutionFromJson, SourcesNotAnArray) {
  Json j = json(kSolution);
  j["sources"] = json(R"({"kernel.cu": "..."})");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.sources", "expected an array of {path, content}, found object"}));
}

// ------------------------------------------------------------------ language and binding

struct NameCase {
  const char* field;
  const char* value;
  const char* hint;
};
void PrintTo(const NameCase& c, std::ostream* os) { *os << c.field << "=" << c.value; }

class UnknownSpecName : public ::testing::TestWithParam<NameCase> {};

TEST_P(UnknownSpecName, IsReportedWithASuggestion) {
  const NameCase& c = GetParam();
  Json j = json(kSolution);
  j["spec"][c.field] = c.value;
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {std::string("$.spec.") + c.field,
                               std::string("unknown ") + c.field + " '" + c.value + "'", c.hint}));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, UnknownSpecName,
    ::testing::Values(NameCase{"language", "Python", "did you mean 'python'?"},
                      NameCase{"language", "cuda_cpp", "did you mean 'cuda'?"},
                      NameCase{"language", "tritonn", "did you mean 'triton'?"},
                      NameCase{"language", "rust",
                               "expected one of: python, triton, cpp, cuda, tilelang"},
                      NameCase{"binding", "tvm_ffi", "did you mean 'tvm-ffi'?"},
                      NameCase{"binding", "pybind11", "expected one of: tvm-ffi, torch, fib"}));

TEST(SolutionFromJson, EveryKnownLanguageAndBindingIsAccepted) {
  for (auto language : kSolutionLanguages) {
    for (auto binding : kSolutionBindings) {
      Json j = json(kSolution);
      j["spec"]["language"] = language;
      j["spec"]["binding"] = binding;
      Diagnostics diag;
      EXPECT_TRUE(read(j, diag)) << language << "/" << binding << ": " << diag.to_string();
    }
  }
}

// ------------------------------------------------------------------ fields and types

TEST(SolutionFromJson, MissingSpec) {
  Json j = json(kSolution);
  j.erase("spec");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$", "missing required field 'spec'"}));
}

TEST(SolutionFromJson, MissingEntryPoint) {
  Json j = json(kSolution);
  j["spec"].erase("entry_point");
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));
  EXPECT_TRUE(OnlyError(diag, {"$.spec", "missing required field 'entry_point'"}));
}

TEST(SolutionFromJson, WrongTypes) {
  {
    Json j = json(kSolution);
    j["spec"]["destination_passing_style"] = "no";
    Diagnostics diag;
    EXPECT_FALSE(read(j, diag));
    EXPECT_TRUE(OnlyError(
        diag, {"$.spec.destination_passing_style", "expected true or false, found string \"no\""}));
  }
  {
    Json j = json(kSolution);
    j["spec"]["target_hardware"] = "H100";
    Diagnostics diag;
    EXPECT_FALSE(read(j, diag));
    EXPECT_TRUE(OnlyError(
        diag, {"$.spec.target_hardware", "expected an array of strings, found string \"H100\""}));
  }
  {
    Json j = json(kSolution);
    j["author"] = "";
    Diagnostics diag;
    EXPECT_FALSE(read(j, diag));
    EXPECT_TRUE(OnlyError(diag, {"$.author", "expected a non-empty string, found \"\""}));
  }
  {
    Json j = json(kSolution);
    j["spec"] = "cuda";
    Diagnostics diag;
    EXPECT_FALSE(read(j, diag));
    EXPECT_TRUE(OnlyError(diag, {"$.spec", "expected an object, found string \"cuda\""}));
  }
}

TEST(SolutionFromJson, UnknownSpecField) {
  Json j = json(kSolution);
  j["spec"]["entrypoint"] = "kernel.cu::run";
  Diagnostics diag;
  EXPECT_FALSE(read(j, diag));  // an unknown field is an error: the solution is not used
  EXPECT_TRUE(OnlyError(
      diag, {"$.spec.entrypoint", "unknown field 'entrypoint'", "did you mean 'entry_point'?"}));
}

}  // namespace
}  // namespace fib
