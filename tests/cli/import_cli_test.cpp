// `fib import`: the report on stdout, and the exit codes (0 all imported, 1 some dump refused,
// 2 unusable flags).
#include <gtest/gtest.h>

#include "run_fib.h"
#include "support/temp_dir.h"
#include "support/test_paths.h"

namespace fib::testing {
namespace {

std::string fixtures(const std::string& sub) {
  return (test_data_dir() / "flashinfer" / sub).string();
}

TEST(ImportCli, DefinitionsThenCallsThenValidate) {
  TempDir dir;
  const std::string ds = dir.path().string();
  const CommandResult defs = run_fib({"import", "flashinfer-defs", fixtures("trace"), "--dataset",
                                      ds, "--tags", "model:tiny,tp:1"});
  EXPECT_EQ(defs.exit_code, 0) << defs.err;
  EXPECT_NE(defs.out.find("19 added, 0 unchanged, 0 kept, 0 skipped, 0 errors\n"),
            std::string::npos)
      << defs.out;
  const CommandResult calls = run_fib({"import", "flashinfer-calls", fixtures("calls_safetensors"),
                                       "--dataset", ds, "--max-per-definition", "4"});
  EXPECT_EQ(calls.exit_code, 0) << calls.err;
  EXPECT_NE(calls.out.find("20 added, 0 unchanged, 0 kept, 5 skipped, 0 errors\n"),
            std::string::npos)
      << calls.out;
  const CommandResult v = run_fib({"validate", "--dataset", ds});
  EXPECT_EQ(v.exit_code, 0) << v.out;
}

TEST(ImportCli, BrokenDumpsExitOneAndBadFlagsTwo) {
  TempDir dir;
  const std::string ds = dir.path().string();
  const CommandResult broken =
      run_fib({"import", "flashinfer-defs", fixtures("broken_trace"), "--dataset", ds});
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.out.find("truncated.json: error\n"), std::string::npos) << broken.out;
  const CommandResult tags = run_fib(
      {"import", "flashinfer-defs", fixtures("trace"), "--dataset", ds, "--tags", "gpu:h100"});
  EXPECT_EQ(tags.exit_code, 2);
  EXPECT_NE(tags.err.find("unknown key 'gpu'"), std::string::npos) << tags.err;
  const CommandResult no_defs =
      run_fib({"import", "flashinfer-calls", fixtures("calls_safetensors"), "--dataset", ds});
  EXPECT_EQ(no_defs.exit_code, 2);
  EXPECT_NE(no_defs.err.find("fib import flashinfer-defs"), std::string::npos) << no_defs.err;
}

}  // namespace
}  // namespace fib::testing
