// TraceSet::load refuses roots that are not datasets, with exact messages and hints, and never
// creates anything on disk while doing so.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fib/dataset/trace_set.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// The single finding of a thrown fib::Error.
Diagnostic only_finding(const Error& e) {
  EXPECT_EQ(e.diagnostics().size(), 1u) << e.what();
  return e.diagnostics().items().at(0);
}

TEST(TraceSetLoadErrors, MissingRootIsAnErrorAndIsNotCreated) {
  TempDir tmp;
  const fs::path root = tmp.path() / "no" / "such" / "dataset";
  try {
    (void)TraceSet::load(root);
    FAIL() << "load of a missing root did not throw";
  } catch (const Error& e) {
    const Diagnostic d = only_finding(e);
    EXPECT_EQ(d.severity, Severity::kError);
    EXPECT_EQ(d.file, root.string());
    EXPECT_EQ(d.path, "");
    EXPECT_EQ(d.message, "dataset folder does not exist");
    EXPECT_EQ(d.hint, "check the path; fib never creates a missing dataset");
    EXPECT_EQ(std::string(e.what()),
              root.string() +
                  ": error: dataset folder does not exist (check the path; fib never creates a "
                  "missing dataset)");
  }
  // Upstream created the folder (and its subfolders); fib must leave the disk alone.
  EXPECT_FALSE(fs::exists(root));
  EXPECT_FALSE(fs::exists(tmp.path() / "no"));
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

TEST(TraceSetLoadErrors, RootThatIsAFileIsAnError) {
  TempDir tmp;
  const fs::path root = tmp.write("dataset.json", "{}\n");
  try {
    (void)TraceSet::load(root);
    FAIL() << "load of a file did not throw";
  } catch (const Error& e) {
    const Diagnostic d = only_finding(e);
    EXPECT_EQ(d.file, root.string());
    EXPECT_EQ(d.message, "dataset path is not a folder");
    EXPECT_EQ(std::string(e.what()), root.string() + ": error: dataset path is not a folder");
  }
  EXPECT_EQ(tmp.read("dataset.json"), "{}\n");
  EXPECT_FALSE(fs::exists(tmp.path() / "definitions"));
}

TEST(TraceSetLoadErrors, RootWithoutAnyDatasetFolderIsAnError) {
  TempDir tmp;
  // Look-alikes do not count: a file named definitions, a "blob" folder, a misspelt folder.
  tmp.write("definitions", "not a folder");
  tmp.write("blob/workloads/x.safetensors", "x");
  tmp.write("workload/gemm/a.jsonl", "");
  try {
    (void)TraceSet::load(tmp.path());
    FAIL() << "load of a non-dataset folder did not throw";
  } catch (const Error& e) {
    const Diagnostic d = only_finding(e);
    EXPECT_EQ(d.file, tmp.path().string());
    EXPECT_EQ(d.message,
              "not a FlashInfer-Trace dataset: it has none of definitions/, workloads/, "
              "solutions/, traces/");
    EXPECT_EQ(d.hint, "point --dataset/--local at the folder that contains definitions/");
  }
  for (const char* top : {"workloads", "solutions", "traces"}) {
    EXPECT_FALSE(fs::exists(tmp.path() / top)) << top << " was created";
  }
  EXPECT_TRUE(fs::is_regular_file(tmp.path() / "definitions"));
}

TEST(TraceSetLoadErrors, EmptyRootFolderIsAnError) {
  TempDir tmp;
  EXPECT_THROW((void)TraceSet::load(tmp.path()), Error);
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

TEST(TraceSetLoadErrors, AnyOneTopFolderMakesADataset) {
  for (const char* top : {"definitions", "workloads", "solutions", "traces"}) {
    TempDir tmp;
    fs::create_directory(tmp.path() / top);
    const TraceSet set = TraceSet::load(tmp.path());
    EXPECT_TRUE(set.load_diagnostics().empty())
        << top << ": " << set.load_diagnostics().to_string();
    EXPECT_TRUE(set.files().empty()) << top;
    EXPECT_TRUE(set.definitions().empty()) << top;
    EXPECT_EQ(set.workload_count(), 0u) << top;
    EXPECT_EQ(set.root(), tmp.path());
    // Only the folder that was there: load adds none of the others.
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(tmp.path())) ++entries;
    EXPECT_EQ(entries, 1u) << top;
  }
}

TEST(TraceSetLoadErrors, TopLevelNameThatIsAFileBesideARealFolderIsReported) {
  TempDir tmp;
  fs::create_directory(tmp.path() / "definitions");
  tmp.write("traces", "oops");
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.file, "traces");
  EXPECT_EQ(d.message, "expected a folder, found a file");
}

}  // namespace
}  // namespace fib
