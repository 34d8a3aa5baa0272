// The run's builds made ahead on several threads (bench/run/builds_ahead.h): each solution built
// once whatever asks for it, builds overlapping in time, a failing build answered like any
// other, and a pool of one thread building one at a time. A wrapper standing in for $CXX
// logs when each compile starts and ends and holds it for half a second.
#include "bench/run/builds_ahead.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace fib::bench::detail {
namespace {

namespace fs = std::filesystem;
using fib::testing::TempDir;

Solution solution(const std::string& name, const std::string& body) {
  Solution s;
  s.name = name;
  s.definition = "add_one";
  s.author = "alice";
  s.spec.language = "cpp";
  s.spec.binding = "fib";
  s.spec.target_hardware = {"cpu"};
  s.spec.entry_point = "kernel.cpp::run";
  s.sources.push_back(SourceFile{"kernel.cpp",
                                 R"(#include <fib/solution.h>
static void add(fib::TensorView x, fib::TensorView y) {
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  for (std::int64_t i = 0; i < x.numel(); ++i) out[i] = )" +
                                     body + R"(;
}
FIB_EXPORT_SOLUTION(run, add);
)",
                                 {}});
  return s;
}

// Logs "start <file>" and "end <file>" around each compile, which it holds for 0.5 s.
BuildOptions options_in(const TempDir& tmp) {
  std::string log(1, '\'');
  log += (tmp.path() / "calls.log").string();
  log += '\'';
  std::string script = "#!/bin/sh\ncase \" $* \" in\n  *\" -c \"*) echo start >> ";
  script += log;
  script += "; sleep 0.5; c++ \"$@\"; r=$?; echo end >> ";
  script += log;
  script += "; exit $r ;;\nesac\nexec c++ \"$@\"\n";
  const fs::path cxx = tmp.write("bin/slow-c++", script);
  fs::permissions(cxx, fs::perms::owner_all, fs::perm_options::add);
  BuildOptions o;
  o.cache_dir = tmp.path() / "cache";
  o.abi_include_dir = fs::path(FIB_SOURCE_DIR) / "include";
  o.timeout = std::chrono::seconds(120);
  o.cxx = cxx.string();
  return o;
}

std::vector<std::string> calls(const TempDir& tmp) {
  std::ifstream in(tmp.path() / "calls.log");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(BuildsAhead, BuildsOverlapAndEachSolutionOnce) {
  TempDir tmp;
  const Solution a = solution("plus_one", "in[i] + 1.0f"), b = solution("plus_two", "in[i] + 2.0f");
  const Solution broken = solution("broken", "in[i] +");
  {
    // `a` twice in the order: built once.
    BuildsAhead pool({&a, &b, &a, &broken}, options_in(tmp), 2);
    EXPECT_EQ(pool.jobs(), 2u);
    EXPECT_TRUE(pool.scheduled("plus_two"));
    EXPECT_FALSE(pool.scheduled("plus_three"));
    EXPECT_EQ(pool.take("plus_one").status, BuildStatus::kBuilt);
    EXPECT_EQ(pool.take("plus_two").status, BuildStatus::kBuilt);
    const BuildResult failed = pool.take("broken");
    EXPECT_EQ(failed.status, BuildStatus::kFailed);
    EXPECT_NE(failed.log.find("error"), std::string::npos) << failed.log;
    pool.wait_idle();
  }
  const auto log = calls(tmp);
  ASSERT_EQ(log.size(), 6u);  // three compiles
  // The first two compiles ran at once: both started before either ended.
  EXPECT_EQ(log[0], "start");
  EXPECT_EQ(log[1], "start");
  // A second pool answers from the cache, compiling nothing.
  BuildsAhead again({&a, &b}, options_in(tmp), 2);
  EXPECT_EQ(again.take("plus_one").status, BuildStatus::kCached);
  EXPECT_EQ(again.take("plus_two").status, BuildStatus::kCached);
  EXPECT_EQ(calls(tmp).size(), 6u);
}

TEST(BuildsAhead, OneThreadBuildsOneAtATime) {
  TempDir tmp;
  const Solution a = solution("plus_one", "in[i] + 1.0f"), b = solution("plus_two", "in[i] + 2.0f");
  BuildsAhead pool({&b, &a}, options_in(tmp), 1);
  EXPECT_EQ(pool.jobs(), 1u);
  pool.wait_idle();
  EXPECT_EQ(calls(tmp), (std::vector<std::string>{"start", "end", "start", "end"}));
  EXPECT_EQ(pool.take("plus_two").status, BuildStatus::kBuilt);
  EXPECT_EQ(pool.take("plus_one").status, BuildStatus::kBuilt);
}

}  // namespace
}  // namespace fib::bench::detail
