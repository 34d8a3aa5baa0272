// The Python runtime's harness (src/bench/runtime/python_harness.py, compiled in) parses as
// Python and defines, at its top level, the functions the C++ side calls (python_backend.cpp).
#include "bench/runtime/python_harness.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "support/temp_dir.h"

namespace fib::bench::detail {
namespace {

TEST(PythonHarness, CompiledInTextParsesAsPythonAndDefinesWhatTheBackendCalls) {
  const std::string harness(kPythonHarness);
  ASSERT_NE(harness.find("def setup("), std::string::npos) << "the harness is not compiled in";
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "SKIPPED: python3 is not available to parse the harness";
  }
  ::fib::testing::TempDir dir;
  dir.write("harness.py", harness);
  dir.write("check.py",
            "import ast, sys\n"
            "tree = ast.parse(open(sys.argv[1]).read(), '<fib harness>')\n"
            "defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}\n"
            "missing = {'setup', 'load', 'call', 'copy_out'} - defined\n"
            "print('missing:', sorted(missing) if missing else 'none')\n"
            "sys.exit(1 if missing else 0)\n");
  const std::string cmd = "python3 " + (dir.path() / "check.py").string() + " " +
                          (dir.path() / "harness.py").string() + " > " +
                          (dir.path() / "out.txt").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << dir.read("out.txt");
}

}  // namespace
}  // namespace fib::bench::detail
