// find_top_level_function: reading a `def`'s parameter names out of Python source without
// running it (decorators, annotations, defaults, strings and comments, docstrings, line numbers).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fib/trace/python_signature.h"

namespace fib {
namespace {

using Params = std::vector<std::string>;

PythonSignature find_ok(std::string_view source, std::string_view name = "run") {
  std::string error;
  auto sig = find_top_level_function(source, name, &error);
  EXPECT_TRUE(error.empty()) << error;
  if (!sig) throw std::runtime_error("no signature found in:\n" + std::string(source));
  return *sig;
}

TEST(FindTopLevelFunction, SimpleDefinitionOnTheFirstLine) {
  const auto sig = find_ok("def run(a, b):\n    return a\n");
  EXPECT_EQ(sig.params, (Params{"a", "b"}));
  EXPECT_EQ(sig.line, 1);
  EXPECT_FALSE(sig.has_var_positional);
  EXPECT_FALSE(sig.has_var_keyword);
}

TEST(FindTopLevelFunction, DecoratorsAndLineNumber) {
  const auto sig = find_ok(
      "import torch\n"
      "\n"
      "\n"
      "@torch.no_grad()\n"
      "@functools.lru_cache(maxsize=None)\n"
      "def run(x):\n"
      "    return x\n");
  EXPECT_EQ(sig.params, (Params{"x"}));
  EXPECT_EQ(sig.line, 6);
}

TEST(FindTopLevelFunction, MultiLineParametersWithAnnotationsAndDefaults) {
  const auto sig = find_ok(
      "def run(\n"
      "    q: torch.Tensor,\n"
      "    scale: float = 1.0 / math.sqrt(128),\n"
      "    shape: Tuple[int, int] = (1, 2),\n"
      "    table: Dict[str, List[int]] = {'a': [1, 2], 'b': [3]},\n"
      "    mode = \"fast\",\n"
      ") -> Tuple[torch.Tensor, torch.Tensor]:\n"
      "    pass\n");
  EXPECT_EQ(sig.params, (Params{"q", "scale", "shape", "table", "mode"}));
  EXPECT_EQ(sig.line, 1);
}

TEST(FindTopLevelFunction, CommentsAndStringsWithCommasAndParentheses) {
  const auto sig = find_ok(
      "def run(a,  # a comment, with a comma ) and a paren (\n"
      "        b='x,)', c=\"(\", d='''a, b)''',\n"
      "        e=\"\\\", )\"):  # escaped quote inside\n"
      "    pass\n");
  EXPECT_EQ(sig.params, (Params{"a", "b", "c", "d", "e"}));
}

TEST(FindTopLevelFunction, StarArgsKeywordOnlyAndPositionalOnlyMarkers) {
  const auto sig = find_ok("def run(a, /, b, *, c, **kwargs):\n    pass\n");
  EXPECT_EQ(sig.params, (Params{"a", "b", "c"}));
  EXPECT_FALSE(sig.has_var_positional);
  EXPECT_TRUE(sig.has_var_keyword);

  const auto sig2 = find_ok("def run(a, *args, b=2):\n    pass\n");
  EXPECT_EQ(sig2.params, (Params{"a", "b"}));
  EXPECT_TRUE(sig2.has_var_positional);
  EXPECT_FALSE(sig2.has_var_keyword);

  const auto sig3 = find_ok("def run(*args: int, **kw: float):\n    pass\n");
  EXPECT_TRUE(sig3.params.empty());
  EXPECT_TRUE(sig3.has_var_positional);
  EXPECT_TRUE(sig3.has_var_keyword);
}

TEST(FindTopLevelFunction, EmptyParameterListAndTrailingComma) {
  EXPECT_TRUE(find_ok("def run():\n    pass\n").params.empty());
  EXPECT_EQ(find_ok("def run(a, b,):\n    pass\n").params, (Params{"a", "b"}));
  EXPECT_EQ(find_ok("def  run (a):\n    pass\n").params, (Params{"a"}));
}

TEST(FindTopLevelFunction, DefInsideATripleQuotedDocstringDoesNotCount) {
  const auto sig = find_ok(
      "\"\"\"Module docs.\n"
      "\n"
      "def run(wrong, params):\n"
      "    ...\n"
      "\"\"\"\n"
      "'''\n"
      "def run(also, wrong):\n"
      "'''\n"
      "def run(right):\n"
      "    pass\n");
  EXPECT_EQ(sig.params, (Params{"right"}));
  EXPECT_EQ(sig.line, 9);
}

TEST(FindTopLevelFunction, IndentedAndNestedDefinitionsAreNotTopLevel) {
  std::string error;
  EXPECT_FALSE(find_top_level_function(
      "class A:\n    def run(self, x):\n        pass\n\ndef outer():\n    def run(y):\n"
      "        pass\n",
      "run", &error));
  EXPECT_EQ(error, "");
  // Found only where it starts a line.
  EXPECT_FALSE(find_top_level_function("x = 1; def run(a): pass\n", "run", &error));
  EXPECT_EQ(error, "");
}

TEST(FindTopLevelFunction, OtherFunctionsWithACommonPrefixAreSkipped) {
  const auto sig =
      find_ok("def runner(x):\n    pass\n\ndef run_all(y):\n    pass\n\ndef run(z):\n");
  EXPECT_EQ(sig.params, (Params{"z"}));
  EXPECT_EQ(sig.line, 7);
  const auto helper = find_ok("def runner(x):\n    pass\n\ndef run(z):\n", "runner");
  EXPECT_EQ(helper.params, (Params{"x"}));
  EXPECT_EQ(helper.line, 1);
}

TEST(FindTopLevelFunction, CommentsWithQuotesBeforeTheDefinition) {
  const auto sig = find_ok(
      "# don't be fooled by this apostrophe\n"
      "# def run(commented, out):\n"
      "x = '#'  # a hash inside a string\n"
      "def run(a):\n");
  EXPECT_EQ(sig.params, (Params{"a"}));
  EXPECT_EQ(sig.line, 4);
}

TEST(FindTopLevelFunction, MultiLineStringsCountTowardTheLineNumber) {
  const auto sig = find_ok(
      "DOC = \"\"\"line 1\n"
      "line 2\n"
      "line 3\"\"\"\n"
      "def run(a):\n");
  EXPECT_EQ(sig.line, 4);
}

TEST(FindTopLevelFunction, AbsentFunctionIsNotAnError) {
  std::string error;
  EXPECT_FALSE(find_top_level_function("def main(x):\n    pass\n", "run", &error));
  EXPECT_EQ(error, "");
  EXPECT_FALSE(find_top_level_function("", "run", &error));
  EXPECT_EQ(error, "");
}

TEST(FindTopLevelFunction, MalformedDefinitionsSetTheError) {
  std::string error;
  EXPECT_FALSE(find_top_level_function("def run:\n    pass\n", "run", &error));
  EXPECT_EQ(error, "'def run' is not followed by '('");

  error.clear();
  EXPECT_FALSE(find_top_level_function("def run(a, b:\n    pass\n", "run", &error));
  EXPECT_EQ(error, "the parameter list of 'def run' is not closed");

  error.clear();
  EXPECT_FALSE(find_top_level_function("def run(a, (b, c)):\n    pass\n", "run", &error));
  EXPECT_EQ(error, "cannot read parameter '(b, c)'");

  // A null error pointer is allowed.
  EXPECT_FALSE(find_top_level_function("def run(a, b:\n", "run", nullptr));
}

}  // namespace
}  // namespace fib
