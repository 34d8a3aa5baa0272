// Compiler diagnostics parsed from build logs: golden gcc, clang, nvcc, ptxas and linker lines,
// each file named as the solution names it (never by the build folder it was compiled in).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fib/bench/builder/compiler_messages.h"

namespace fib::bench {
namespace {

const std::vector<std::string> kSources = {"kernel.cpp", "kernel.cu", "sub/helpers.h"};

std::string line_of(const CompilerMessage& m) {
  return m.file + "|" + m.origin + "|" + std::to_string(m.line) + "|" + std::to_string(m.column) +
         "|" + m.severity + "|" + m.message;
}

std::vector<std::string> lines_of(const CompilerMessages& m) {
  std::vector<std::string> out;
  for (const auto& c : m.messages) out.push_back(line_of(c));
  return out;
}

TEST(CompilerMessages, GccLinesGiveTheSolutionsFileLineAndColumn) {
  const std::string log =
      "$ c++ -O2 -c kernel.cpp -o ../obj/kernel.cpp.o\n"
      "/home/u/.cache/fib/build/tmp/3f2a-Xy12/src/kernel.cpp: In function 'void run()':\n"
      "/home/u/.cache/fib/build/tmp/3f2a-Xy12/src/kernel.cpp:12:5: error: 'foo' was not "
      "declared in this scope\n"
      "   12 |     foo();\n"
      "      |     ^~~\n"
      "In file included from kernel.cpp:1:\n"
      "./sub/helpers.h:3:10: fatal error: missing.h: No such file or directory\n"
      "../include/fib/solution.h:40:3: note: declared here\n"
      "/usr/include/c++/12/bits/stl_vector.h:100:7: warning: unused [-Wunused]\n"
      "kernel.cpp:7: error: a line without a column\n"
      "# exit status 1 (0.31 s)\n";
  const CompilerMessages m = parse_compiler_messages(log, kSources);
  EXPECT_EQ(lines_of(m),
            (std::vector<std::string>{
                "kernel.cpp|solution|12|5|error|'foo' was not declared in this scope",
                "sub/helpers.h|solution|3|10|fatal error|missing.h: No such file or directory",
                "fib/solution.h|fib|40|3|note|declared here",
                "/usr/include/c++/12/bits/stl_vector.h|toolchain|100|7|warning|unused [-Wunused]",
                "kernel.cpp|solution|7|0|error|a line without a column"}));
  EXPECT_EQ(m.errors, 3);
  EXPECT_EQ(m.warnings, 1);
  EXPECT_EQ(m.omitted, 0u);
}

TEST(CompilerMessages, NvccPtxasAndLinkerLines) {
  const std::string log =
      "kernel.cu(25): error: identifier \"undefined_thing\" is undefined\n"
      "      undefined_thing<<<1, 1>>>();\n"
      "      ^\n"
      "/tmp/build/src/kernel.cu(7): warning #177-D: variable \"x\" was declared but never "
      "referenced\n"
      "kernel.cu(30) (col. 12): error #20: identifier \"y\" is undefined\n"
      "kernel.cu(2): catastrophic error: cannot open source file \"nope.h\"\n"
      "ptxas info    : Used 10 registers\n"
      "ptxas error   : Entry function '_Z1kv' uses too much shared data (0x10000 bytes, 0xc000 "
      "max)\n"
      "nvcc fatal   : Unsupported gpu architecture 'compute_999'\n"
      "/usr/bin/ld: ../obj/kernel.cpp.o: in function `run':\n"
      "kernel.cpp:(.text+0x1c): undefined reference to `helper()'\n"
      "collect2: error: ld returned 1 exit status\n";
  const CompilerMessages m = parse_compiler_messages(log, kSources);
  EXPECT_EQ(lines_of(m),
            (std::vector<std::string>{
                "kernel.cu|solution|25|0|error|identifier \"undefined_thing\" is undefined",
                "kernel.cu|solution|7|0|warning|variable \"x\" was declared but never referenced",
                "kernel.cu|solution|30|12|error|identifier \"y\" is undefined",
                "kernel.cu|solution|2|0|fatal error|cannot open source file \"nope.h\"",
                "||0|0|error|ptxas: Entry function '_Z1kv' uses too much shared data (0x10000 "
                "bytes, 0xc000 max)",
                "||0|0|fatal error|nvcc: Unsupported gpu architecture 'compute_999'",
                "kernel.cpp|solution|0|0|error|undefined reference to `helper()'"}));
  EXPECT_EQ(m.errors, 6);
  EXPECT_EQ(m.warnings, 1);
}

TEST(CompilerMessages, ListIsCappedAndLongMessagesCut) {
  std::string log;
  for (int i = 1; i <= 25; ++i) log += "kernel.cpp:" + std::to_string(i) + ":1: error: bad\n";
  log += "kernel.cpp:99:1: error: " + std::string(100000, 'x') + "\n";
  const CompilerMessages m = parse_compiler_messages(log, kSources);
  EXPECT_EQ(m.messages.size(), kMaxCompilerMessages);
  EXPECT_EQ(m.errors, 26);
  EXPECT_EQ(m.omitted, 6u);
  const CompilerMessages one = parse_compiler_messages(
      "kernel.cpp:99:1: error: " + std::string(100000, 'x') + "\n", kSources);
  ASSERT_EQ(one.messages.size(), 1u);
  EXPECT_EQ(one.messages[0].message.size(), kMaxCompilerMessageBytes + 3);
}

TEST(CompilerMessages, JsonAndTextForms) {
  const CompilerMessages m = parse_compiler_messages(
      "kernel.cpp:12:5: error: 'foo' was not declared\nptxas error   : too much shared data\n",
      kSources);
  EXPECT_EQ(to_json(m).dump(),
            "{\"errors\":2,\"warnings\":0,\"omitted\":0,\"messages\":[{\"file\":\"kernel.cpp\","
            "\"origin\":\"solution\",\"line\":12,\"column\":5,\"severity\":\"error\",\"message\":"
            "\"'foo' was not declared\"},{\"severity\":\"error\",\"message\":\"ptxas: too much "
            "shared data\"}]}");
  EXPECT_EQ(render_compiler_messages(m),
            "  kernel.cpp:12:5: error: 'foo' was not declared\n"
            "  error: ptxas: too much shared data\n");
}

}  // namespace
}  // namespace fib::bench
