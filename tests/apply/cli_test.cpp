// `fib apply table` and `fib apply export` end to end: the trusted-keys flag (a file or a folder),
// the summary of what was skipped, the JSON written, the export folder, and bad flags.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "apply/apply_fixture.h"
#include "support/test_paths.h"

namespace fib::apply {
namespace {

namespace fs = std::filesystem;
using testing::latency;

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr
};

// Runs fib with its home at `home` and no trusted-keys file but the one there; `env` adds
// variables ("NAME='value'").
Result fib_cli(const fs::path& home, const std::string& args, const std::string& env = "") {
  const std::string command =
      env + " FIB_HOME='" + home.string() + "' FIB_TRUSTED_KEYS= '" FIB_EXE "' " + args + " 2>&1";
  Result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) r.output += buf.data();
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

struct Fixture {
  fib::testing::TempDir dir;
  testing::ApplyDataset b{dir.path() / "data"};
  SigningKey alice = testing::key_of(3), mallory = testing::key_of(4);
  std::string flags;

  Fixture() {
    b.definition("gemm_a");
    b.solution("good", "gemm_a");
    b.solution("forged", "gemm_a", "mallory");
    b.signer = &alice;
    b.trace("gemm_a", "good", "w", 4, "PASSED", latency(1.0));
    b.signer = &mallory;
    b.trace("gemm_a", "forged", "w", 4, "PASSED", latency(0.1));
    dir.write("keys/alice.pub", alice.public_key().line("alice@gpu") + "\n");
    flags = "--dataset '" + b.root().string() + "' --cache-dir '" +
            (dir.path() / "cache").string() + "' --build-cache '" +
            (dir.path() / "build").string() + "'";
  }
  fs::path home() const { return dir.path() / "home"; }
};

TEST(ApplyCli, TableTrustsOnlyTheKeysGiven) {
  Fixture f;
  const fs::path out = f.dir.path() / "table.json";
  const Result r =
      fib_cli(f.home(), "apply table " + f.flags + " --trusted-keys '" +
                            (f.dir.path() / "keys").string() + "' --out '" + out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("M=4: good 1 ms, speedup 10x, 1 trace(s)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("2 evaluation trace(s) read, 1 used; 1 untrusted"), std::string::npos)
      << r.output;
  Diagnostics diag;
  const auto j = read_json_file(out.string(), diag);
  ASSERT_TRUE(j) << diag.to_string();
  EXPECT_EQ((*j)["definitions"]["gemm_a"]["entries"][0]["solution"], "good");
  EXPECT_EQ((*j)["options"]["trusted_key_ids"][0], f.alice.public_key().key_id());

  const Result none = fib_cli(f.home(), "apply table " + f.flags);  // no key trusted
  ASSERT_EQ(none.status, 0) << none.output;
  EXPECT_NE(none.output.find("2 evaluation trace(s) read, 0 used; 2 untrusted"), std::string::npos)
      << none.output;
}

TEST(ApplyCli, ExportWritesTheTraceApplyFolder) {
  Fixture f;
  const fs::path out = f.dir.path() / "fi";
  const Result r =
      fib_cli(f.home(), "apply export '" + out.string() + "' " + f.flags + " --trusted-keys '" +
                            (f.dir.path() / "keys/alice.pub").string() + "'");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("exported 1 definition(s), one solution each"), std::string::npos)
      << r.output;
  EXPECT_TRUE(fs::is_regular_file(out / "solutions/alice/gemm/gemm_a/good.json"));
  EXPECT_TRUE(fs::is_regular_file(out / "definitions/gemm/gemm_a.json"));
  EXPECT_FALSE(fs::exists(out / "solutions/mallory"));
}

TEST(ApplyCli, BadLimitsAndMissingKeysAreUsageErrors) {
  Fixture f;
  const Result limit = fib_cli(f.home(), "apply table " + f.flags + " --max-nmse lots");
  EXPECT_EQ(limit.status, 2);
  EXPECT_NE(limit.output.find("--max-nmse: error: 'lots' is not a limit"), std::string::npos)
      << limit.output;
  const Result keys = fib_cli(f.home(), "apply table " + f.flags + " --trusted-keys /nonexistent");
  EXPECT_EQ(keys.status, 2);
  EXPECT_NE(keys.output.find("no such trusted-keys file or folder"), std::string::npos)
      << keys.output;
}

// The loop on real traces: `fib run` signs the solution's digest and build key into its traces,
// and `fib apply table` then takes the solution with its built library from the build cache.
TEST(ApplyCli, TheTracesFibRunWritesMakeATable) {
  fib::testing::TempDir dir;
  fib::testing::copy_tree(fib::testing::source_dir() / "examples/dataset", dir.path() / "ds");
  const std::string env = "FIB_CACHE_DIR='" + (dir.path() / "build").string() + "'";
  const std::string dataset = " --dataset '" + (dir.path() / "ds").string() + "'";
  const Result run = fib_cli(dir.path() / "home",
                             "run" + dataset +
                                 " --definitions rmsnorm_h2048 --solutions rmsnorm_h2048_fast "
                                 "--reference-cache off",
                             env);
  ASSERT_EQ(run.status, 0) << run.output;
  const Result table = fib_cli(dir.path() / "home", "apply table --json --no-cache" + dataset, env);
  ASSERT_EQ(table.status, 0) << table.output;
  Diagnostics diag;
  const auto j = parse_json(table.output.substr(table.output.find('{')), "(stdout)", diag);
  ASSERT_TRUE(j) << table.output;
  const Json& d = (*j)["definitions"]["rmsnorm_h2048"];
  ASSERT_EQ(d["entries"].size(), 2u) << table.output;  // the example's two workloads' axes
  const TraceSet set = TraceSet::load(dir.path() / "ds");
  for (const Json& e : d["entries"]) {
    EXPECT_EQ(e["solution"], "rmsnorm_h2048_fast");
    EXPECT_EQ(e["digest"], solution_digest(set.solution("rmsnorm_h2048_fast")->value));
    EXPECT_EQ(e["artifact"]["kind"], "shared_object");
    EXPECT_TRUE(fs::is_regular_file(e["artifact"]["path"].get<std::string>()));
  }
  EXPECT_EQ((*j)["skipped"]["no_digest"], 0);
}

}  // namespace
}  // namespace fib::apply
