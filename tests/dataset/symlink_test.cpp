// Symbolic links inside a dataset tree: loops are reported and loading terminates, dangling
// links are reported, and linked folders are listed under the path they were reached by.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>

#include "dataset_fixtures.h"
#include "fib/dataset/trace_set.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Loads on another thread so that a loader stuck in a loop fails the test instead of hanging.
TraceSet load_with_deadline(const fs::path& root) {
  auto f = std::async(std::launch::async, [root] { return TraceSet::load(root); });
  if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    ADD_FAILURE() << "TraceSet::load did not finish within 60 s (a symlink loop?)";
    std::abort();  // the loader thread cannot be cancelled
  }
  return f.get();
}

TEST(DatasetSymlinks, LoopToAParentFolderIsReportedAndLoadTerminates) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  fs::create_directory_symlink("..", tmp.path() / "definitions" / "gemm" / "loop");
  const TraceSet set = load_with_deadline(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.severity, Severity::kError);
  EXPECT_EQ(d.file, "definitions/gemm/loop");
  EXPECT_EQ(d.message, "symbolic link loop: this folder was already visited");
  EXPECT_EQ(d.hint, "remove the link");
  // The definition is read once, from its real path.
  ASSERT_EQ(set.files().size(), 1u);
  EXPECT_EQ(set.files()[0].path, "definitions/gemm/d.json");
  EXPECT_EQ(set.definitions().size(), 1u);
}

TEST(DatasetSymlinks, LinkToItselfIsReported) {
  TempDir tmp;
  tmp.write("workloads/gemm/d.jsonl", testing::workload_line("d", "u1") + "\n");
  fs::create_symlink("self", tmp.path() / "workloads" / "gemm" / "self");
  const TraceSet set = load_with_deadline(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.file, "workloads/gemm/self");
  EXPECT_EQ(d.message, "symbolic link loop");
  EXPECT_EQ(set.workload_count(), 1u);
}

TEST(DatasetSymlinks, DanglingLinkIsReported) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  fs::create_symlink("gone.json", tmp.path() / "definitions" / "gemm" / "e.json");
  const TraceSet set = load_with_deadline(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.file, "definitions/gemm/e.json");
  EXPECT_EQ(d.message, "broken symbolic link or unreadable entry");
  EXPECT_EQ(set.definitions().size(), 1u);
  ASSERT_EQ(set.files().size(), 1u);
}

TEST(DatasetSymlinks, LinkedFolderIsListedUnderItsLinkPath) {
  // A top folder that is a link to a folder elsewhere (a shared workloads checkout, say):
  // its files keep dataset-relative paths.
  TempDir tmp;
  tmp.write("elsewhere/gemm/d.jsonl", testing::workload_line("d", "u1") + "\n");
  tmp.write("ds/definitions/gemm/d.json", testing::definition_json("d"));
  fs::create_directory_symlink(tmp.path() / "elsewhere", tmp.path() / "ds" / "workloads");
  const TraceSet set = load_with_deadline(tmp.path() / "ds");
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  ASSERT_EQ(set.files().size(), 2u);
  EXPECT_EQ(set.files()[1].path, "workloads/gemm/d.jsonl");
  EXPECT_EQ(set.files()[1].kind, FileKind::kWorkloads);
  ASSERT_NE(set.workload("u1"), nullptr);
  EXPECT_EQ(set.where(set.workload("u1")->source), "workloads/gemm/d.jsonl:1");
}

TEST(DatasetSymlinks, SecondLinkToTheSameFolderIsReportedOnce) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  fs::create_directory_symlink("gemm", tmp.path() / "definitions" / "alias");
  const TraceSet set = load_with_deadline(tmp.path());
  // Whichever of the two paths is walked second is the reported one; the file loads once.
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_TRUE(d.file == "definitions/alias" || d.file == "definitions/gemm") << d.file;
  EXPECT_EQ(d.message, "symbolic link loop: this folder was already visited");
  ASSERT_EQ(set.files().size(), 1u);
  EXPECT_EQ(set.definitions().size(), 1u);
}

}  // namespace
}  // namespace fib
