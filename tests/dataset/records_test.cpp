// Loading small hand-made datasets: duplicates, records in the wrong folder, sources and
// orphans, each reported with its file (and line) while the rest still loads.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "dataset_fixtures.h"
#include "fib/dataset/trace_set.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(TraceSetRecords, DuplicateDefinitionNameNamesBothFilesAndKeepsTheFirst) {
  TempDir tmp;
  tmp.write("definitions/gemm/a_first.json", testing::definition_json("dup", "gemm"));
  tmp.write("definitions/rmsnorm/z_second.json", testing::definition_json("dup", "rmsnorm"));
  tmp.write("definitions/gemm/other.json", testing::definition_json("other"));
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.severity, Severity::kError);
  EXPECT_EQ(d.file, "definitions/rmsnorm/z_second.json");
  EXPECT_EQ(d.path, "$.name");
  EXPECT_EQ(d.message,
            "duplicate definition name 'dup' (also defined in definitions/gemm/a_first.json); "
            "this file is ignored");
  ASSERT_EQ(set.definitions().size(), 2u);
  const auto* kept = set.definition_record("dup");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->value.op_type, "gemm");  // the first file (by path) wins
  EXPECT_EQ(set.where(kept->source), "definitions/gemm/a_first.json");
  EXPECT_TRUE(set.definitions_with_op_type("rmsnorm").empty());
}

TEST(TraceSetRecords, DuplicateSolutionNameNamesBothFilesAndKeepsTheFirst) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  tmp.write("solutions/alice/gemm/d/fast.json", testing::solution_json("fast", "d", "alice"));
  tmp.write("solutions/bob/gemm/d/fast.json", testing::solution_json("fast", "d", "bob"));
  tmp.write("solutions/bob/gemm/d/slow.json", testing::solution_json("slow", "d", "bob"));
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.file, "solutions/bob/gemm/d/fast.json");
  EXPECT_EQ(d.path, "$.name");
  EXPECT_EQ(d.message,
            "duplicate solution name 'fast' (also in solutions/alice/gemm/d/fast.json); this "
            "file is ignored");
  EXPECT_EQ(set.solution_count(), 2u);
  ASSERT_NE(set.solution("fast"), nullptr);
  EXPECT_EQ(set.solution("fast")->value.author, "alice");
  EXPECT_EQ(set.where(set.solution("fast")->source), "solutions/alice/gemm/d/fast.json");
  ASSERT_EQ(set.solutions("d").size(), 2u);
  EXPECT_EQ(set.solutions("d")[0].value.name, "fast");
  EXPECT_EQ(set.solutions("d")[1].value.name, "slow");
}

TEST(TraceSetRecords, WorkloadRecordUnderTracesIsAnErrorWithFileAndLine) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  tmp.write("solutions/alice/gemm/d/s.json", testing::solution_json("s", "d", "alice"));
  tmp.write("traces/alice/gemm/d.jsonl", testing::passed_trace_line("d", "u1", "s", 1.0) + "\n" +
                                             testing::workload_line("d", "u2") + "\n" +
                                             testing::passed_trace_line("d", "u3", "s", 2.0) +
                                             "\n");
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.file, "traces/alice/gemm/d.jsonl:2");
  EXPECT_EQ(d.message, "a record under traces/ has no solution or evaluation");
  EXPECT_EQ(d.hint, "workload records belong under workloads/");
  ASSERT_EQ(set.traces("d").size(), 2u);
  EXPECT_EQ(set.where(set.traces("d")[0].source), "traces/alice/gemm/d.jsonl:1");
  EXPECT_EQ(set.where(set.traces("d")[1].source), "traces/alice/gemm/d.jsonl:3");
  EXPECT_EQ(set.workload_count(), 0u);
  EXPECT_EQ(set.workload("u2"), nullptr);
}

TEST(TraceSetRecords, TraceUnderWorkloadsIsAnErrorWithFileAndLine) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  tmp.write("workloads/gemm/d.jsonl", testing::workload_line("d", "u1") + "\n\n" +
                                          testing::failed_trace_line("d", "u2", "s") + "\n" +
                                          testing::workload_line("d", "u3") + "\n");
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.file, "workloads/gemm/d.jsonl:3");  // the blank line 2 still counts
  EXPECT_EQ(d.message, "a record under workloads/ carries a solution and evaluation");
  EXPECT_EQ(d.hint, "evaluation traces belong under traces/");
  ASSERT_EQ(set.workloads("d").size(), 2u);
  EXPECT_EQ(set.workloads("d")[0].value.workload.uuid, "u1");
  EXPECT_EQ(set.workloads("d")[1].value.workload.uuid, "u3");
  EXPECT_EQ(set.where(set.workloads("d")[1].source), "workloads/gemm/d.jsonl:4");
  EXPECT_EQ(set.trace_count(), 0u);
  EXPECT_EQ(set.files()[1].records, 2u);
}

TEST(TraceSetRecords, InvalidFilesAreReportedAndSkipped) {
  TempDir tmp;
  tmp.write("definitions/gemm/good.json", testing::definition_json("good"));
  tmp.write("definitions/gemm/broken.json", "{\"name\": \"broken\",\n  \"op_type\": }\n");
  tmp.write("workloads/gemm/good.jsonl", testing::workload_line("good", "u1") + "\n{not json}\n" +
                                             testing::workload_line("good", "u3") + "\n");
  tmp.write("definitions/gemm/notes.txt", "ignored");
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 2u) << set.load_diagnostics().to_string();
  const Diagnostic& a = set.load_diagnostics().items()[0];
  EXPECT_EQ(a.file, "definitions/gemm/broken.json");
  EXPECT_TRUE(a.message.starts_with("line 2, column 14: invalid JSON: ")) << a.message;
  const Diagnostic& b = set.load_diagnostics().items()[1];
  EXPECT_EQ(b.file, "workloads/gemm/good.jsonl:2");
  EXPECT_TRUE(b.message.starts_with("line 1, column 3: invalid JSON: ")) << b.message;
  EXPECT_EQ(set.definitions().size(), 1u);
  EXPECT_EQ(set.workloads("good").size(), 2u);
  // notes.txt is listed but not read as a record file.
  ASSERT_EQ(set.files().size(), 4u);
  EXPECT_EQ(set.files()[2].path, "definitions/gemm/notes.txt");
  EXPECT_EQ(set.files()[2].kind, FileKind::kOther);
  EXPECT_EQ(set.files()[2].records, 0u);
}

TEST(TraceSetRecords, FileKindsFollowTheTopFolderAndExtension) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  tmp.write("definitions/gemm/d.jsonl", "");
  tmp.write("workloads/gemm/d.jsonl", testing::workload_line("d", "u1") + "\n");
  tmp.write("workloads/gemm/d.json", "{}");
  tmp.write("solutions/a/gemm/d/s.json", testing::solution_json("s", "d", "a"));
  tmp.write("traces/a/gemm/d.jsonl", testing::passed_trace_line("d", "u1", "s", 0.5) + "\n");
  const TraceSet set = TraceSet::load(tmp.path());
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  std::vector<std::pair<std::string, FileKind>> got;
  for (const auto& f : set.files()) got.emplace_back(f.path, f.kind);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, FileKind>>{
                     {"definitions/gemm/d.json", FileKind::kDefinition},
                     {"definitions/gemm/d.jsonl", FileKind::kOther},
                     {"solutions/a/gemm/d/s.json", FileKind::kSolution},
                     {"traces/a/gemm/d.jsonl", FileKind::kTraces},
                     {"workloads/gemm/d.json", FileKind::kOther},
                     {"workloads/gemm/d.jsonl", FileKind::kWorkloads},
                 }));
  EXPECT_EQ(set.trace_count(), 1u);
  ASSERT_EQ(set.traces_of_solution("s").size(), 1u);
  EXPECT_EQ(set.traces_of_solution("s")[0]->workload.uuid, "u1");
  EXPECT_TRUE(set.traces_of_solution("nobody").empty());
}

TEST(TraceSetRecords, OrphansAreRecordsWithoutADefinitionFile) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  tmp.write("workloads/gemm/lost_w.jsonl", testing::workload_line("lost_w", "u1") + "\n");
  tmp.write("solutions/a/gemm/lost_s/s.json", testing::solution_json("s", "lost_s", "a"));
  tmp.write("traces/a/gemm/lost_t.jsonl",
            testing::passed_trace_line("lost_t", "u9", "s", 1.0) + "\n");
  const TraceSet set = TraceSet::load(tmp.path());
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  EXPECT_EQ(set.orphan_definition_names(),
            (std::vector<std::string>{"lost_s", "lost_t", "lost_w"}));
}

TEST(TraceSetRecords, RootWithATrailingSlashGivesTheSamePaths) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  tmp.write("workloads/gemm/d.jsonl", testing::workload_line("d", "u1") + "\n");
  const TraceSet set = TraceSet::load(tmp.path().string() + "/");
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  ASSERT_EQ(set.files().size(), 2u);
  EXPECT_EQ(set.files()[0].path, "definitions/gemm/d.json");
  EXPECT_EQ(set.files()[1].path, "workloads/gemm/d.jsonl");
  EXPECT_EQ(set.where(set.workload("u1")->source), "workloads/gemm/d.jsonl:1");
}

TEST(TraceSetRecords, TemporaryFilesOfAtomicWritesAreNotListed) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  tmp.write("definitions/gemm/.d.json.tmp.123.0.456", "{ half a fil");
  const TraceSet set = TraceSet::load(tmp.path());
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  ASSERT_EQ(set.files().size(), 1u);
  EXPECT_EQ(set.files()[0].path, "definitions/gemm/d.json");
}

}  // namespace
}  // namespace fib
