// Traces in a dataset: best_per_workload, appending traces and workloads to their canonical
// files, writing definitions and solutions, and the in-memory add_* methods.
#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "dataset_fixtures.h"
#include "fib/base/json.h"
#include "fib/dataset/layout.h"
#include "fib/dataset/trace_set.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// (uuid, solution, latency) of each trace best_per_workload returned.
struct Pick {
  std::string uuid, solution;
  double latency;
  bool operator==(const Pick&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Pick& p) {
  return os << "{" << p.uuid << ", " << p.solution << ", " << p.latency << "}";
}
std::vector<Pick> picks(const std::vector<const Trace*>& traces) {
  std::vector<Pick> out;
  for (const Trace* t : traces) {
    out.push_back({t->workload.uuid, *t->solution, t->evaluation->performance->latency_ms});
  }
  return out;
}

TEST(BestPerWorkload, PicksTheFastestPassedTraceInWorkloadOrder) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  // Workload order is file order, not uuid order.
  tmp.write("workloads/gemm/d.jsonl",
            testing::workload_line("d", "u3") + "\n" + testing::workload_line("d", "u1") + "\n" +
                testing::workload_line("d", "u2") + "\n" + testing::workload_line("d", "u4") +
                "\n" + testing::workload_line("d", "u6") + "\n");
  for (const char* s : {"s1", "s2", "s3"}) {
    tmp.write(std::string("solutions/alice/gemm/d/") + s + ".json",
              testing::solution_json(s, "d", "alice"));
  }
  tmp.write("traces/alice/gemm/d.jsonl",
            testing::passed_trace_line("d", "u1", "s1", 2.0) + "\n" +
                testing::passed_trace_line("d", "u1", "s2", 1.5) + "\n" +
                testing::failed_trace_line("d", "u1", "s3") + "\n" +
                testing::numerical_trace_line("d", "u1", "s3") + "\n" +
                // u2: nobody passed (a zero latency is no measurement).
                testing::failed_trace_line("d", "u2", "s1", "COMPILE_ERROR") + "\n" +
                testing::passed_trace_line("d", "u2", "s2", 0.0) + "\n" +
                testing::passed_trace_line("d", "u3", "s2", 0.9) + "\n" +
                testing::passed_trace_line("d", "u3", "s1", 0.7) + "\n" +
                testing::passed_trace_line("d", "u3", "s3", 0.8) + "\n" +
                // u4: a tie keeps the first trace in file order.
                testing::passed_trace_line("d", "u4", "s2", 1.25) + "\n" +
                testing::passed_trace_line("d", "u4", "s1", 1.25) + "\n" +
                // u5 is in no workloads file: it comes after the known workloads.
                testing::passed_trace_line("d", "u5", "s2", 3.0) + "\n");
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  ASSERT_EQ(set.trace_count(), 12u);
  EXPECT_EQ(picks(set.best_per_workload("d")),
            (std::vector<Pick>{
                {"u3", "s1", 0.7}, {"u1", "s2", 1.5}, {"u4", "s2", 1.25}, {"u5", "s2", 3.0}}));
  EXPECT_TRUE(set.best_per_workload("other").empty());
  EXPECT_EQ(set.traces_of_solution("s3").size(), 3u);
}

TEST(BestPerWorkload, WorksOnAnInMemorySet) {
  TraceSet set("/nonexistent/in-memory");
  set.add_definition(testing::make_definition(testing::definition_json("d")));
  set.add_workload(testing::make_trace(testing::workload_line("d", "w1")));
  set.add_workload(testing::make_trace(testing::workload_line("d", "w2")));
  set.add_trace(testing::make_trace(testing::passed_trace_line("d", "w2", "a", 5.0)));
  set.add_trace(testing::make_trace(testing::passed_trace_line("d", "w2", "b", 4.0)));
  set.add_trace(testing::make_trace(testing::passed_trace_line("d", "w1", "a", 1.0)));
  set.add_trace(testing::make_trace(testing::passed_trace_line("d", "w2", "c", 4.5)));
  EXPECT_EQ(picks(set.best_per_workload("d")),
            (std::vector<Pick>{{"w1", "a", 1.0}, {"w2", "b", 4.0}}));
  EXPECT_EQ(set.where(set.workload("w1")->source), "(in memory)");
  EXPECT_TRUE(set.files().empty());
  EXPECT_FALSE(fs::exists("/nonexistent/in-memory"));
}

TEST(TraceSetAdd, DuplicateNamesAreRefused) {
  TraceSet set("unused");
  set.add_definition(testing::make_definition(testing::definition_json("d")));
  try {
    set.add_definition(testing::make_definition(testing::definition_json("d", "rmsnorm")));
    FAIL() << "a second definition 'd' was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "d: error: a definition with this name already exists");
  }
  EXPECT_EQ(set.definition("d")->op_type, "gemm");
  set.add_solution(testing::make_solution(testing::solution_json("s", "d", "alice")));
  try {
    set.add_solution(testing::make_solution(testing::solution_json("s", "d", "bob")));
    FAIL() << "a second solution 's' was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "s: error: a solution with this name already exists");
  }
  EXPECT_EQ(set.solution("s")->value.author, "alice");
  EXPECT_EQ(set.solution_count(), 1u);
}

// A dataset on disk with one definition and solutions by two authors.
struct WritableSet {
  TempDir tmp;
  TraceSet set{""};
  WritableSet() {
    tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
    tmp.write("solutions/alice/gemm/d/sa.json", testing::solution_json("sa", "d", "alice"));
    tmp.write("solutions/bob/gemm/d/sb.json", testing::solution_json("sb", "d", "bob"));
    set = TraceSet::load(tmp.path());
  }
};

TEST(AppendTraces, WritesCanonicalFilesThatLoadBackEqual) {
  WritableSet w;
  const std::vector<Trace> traces = {
      testing::make_trace(testing::passed_trace_line("d", "u1", "sa", 0.25)),
      testing::make_trace(testing::failed_trace_line("d", "u1", "sb", "TIMEOUT")),
      testing::make_trace(testing::numerical_trace_line("d", "u2", "sa")),
  };
  append_traces(w.set, traces);
  EXPECT_EQ(w.set.trace_count(), 3u);  // added in memory too
  EXPECT_EQ(layout::traces_file("alice", "gemm", "d"), fs::path("traces/alice/gemm/d.jsonl"));
  EXPECT_EQ(w.tmp.read("traces/alice/gemm/d.jsonl"),
            dump_json_line(to_json(traces[0])) + "\n" + dump_json_line(to_json(traces[2])) + "\n");
  EXPECT_EQ(w.tmp.read("traces/bob/gemm/d.jsonl"), dump_json_line(to_json(traces[1])) + "\n");

  // A second batch appends after the first.
  const std::vector<Trace> more = {
      testing::make_trace(testing::passed_trace_line("d", "u2", "sa", 0.125))};
  append_traces(w.set, more);

  const TraceSet back = TraceSet::load(w.tmp.path());
  ASSERT_TRUE(back.load_diagnostics().empty()) << back.load_diagnostics().to_string();
  const auto& got = back.traces("d");
  ASSERT_EQ(got.size(), 4u);
  // Files load in path order (alice before bob), records in line order.
  EXPECT_EQ(to_json(got[0].value), to_json(traces[0]));
  EXPECT_EQ(to_json(got[1].value), to_json(traces[2]));
  EXPECT_EQ(to_json(got[2].value), to_json(more[0]));
  EXPECT_EQ(to_json(got[3].value), to_json(traces[1]));
  EXPECT_EQ(back.where(got[2].source), "traces/alice/gemm/d.jsonl:3");
  EXPECT_EQ(back.where(got[3].source), "traces/bob/gemm/d.jsonl:1");
  EXPECT_EQ(picks(back.best_per_workload("d")),
            (std::vector<Pick>{{"u1", "sa", 0.25}, {"u2", "sa", 0.125}}));
}

TEST(AppendTraces, InvalidBatchWritesNothing) {
  WritableSet w;
  const Trace good = testing::make_trace(testing::passed_trace_line("d", "u1", "sa", 1.0));
  const Trace unknown_solution =
      testing::make_trace(testing::passed_trace_line("d", "u1", "zz", 1.0));
  const Trace unknown_definition =
      testing::make_trace(testing::passed_trace_line("nodef", "u1", "sa", 1.0));
  const Trace workload = testing::make_trace(testing::workload_line("d", "u1"));
  auto message = [&](const Trace& bad) {
    try {
      append_traces(w.set, std::vector<Trace>{good, bad});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(unknown_solution),
            "zz: error: trace names a solution that is not in the dataset");
  EXPECT_EQ(message(unknown_definition),
            "nodef: error: trace names a definition that is not in the dataset");
  EXPECT_EQ(message(workload), "d: error: cannot append a trace without a solution");
  EXPECT_FALSE(fs::exists(w.tmp.path() / "traces"));
  EXPECT_EQ(w.set.trace_count(), 0u);
}

TEST(AppendWorkloads, WritesCanonicalFileThatLoadsBackEqual) {
  WritableSet w;
  const std::vector<Trace> workloads = {testing::make_trace(testing::workload_line("d", "w1", 7)),
                                        testing::make_trace(testing::workload_line("d", "w2", 9))};
  append_workloads(w.set, workloads);
  EXPECT_EQ(w.set.workloads("d").size(), 2u);
  EXPECT_EQ(w.tmp.read("workloads/gemm/d.jsonl"), dump_json_line(to_json(workloads[0])) + "\n" +
                                                      dump_json_line(to_json(workloads[1])) + "\n");
  const TraceSet back = TraceSet::load(w.tmp.path());
  ASSERT_TRUE(back.load_diagnostics().empty()) << back.load_diagnostics().to_string();
  ASSERT_EQ(back.workloads("d").size(), 2u);
  EXPECT_EQ(to_json(back.workloads("d")[1].value), to_json(workloads[1]));
  EXPECT_EQ(back.workload("w2")->value.workload.axes, (AxisValues{{"M", 9}}));

  try {
    append_workloads(w.set,
                     std::vector<Trace>{testing::make_trace(testing::workload_line("x", "w"))});
    FAIL() << "a workload of an unknown definition was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "x: error: workload names a definition that is not in the dataset");
  }
  EXPECT_FALSE(fs::exists(w.tmp.path() / "workloads" / "gemm" / "x.jsonl"));
}

TEST(WriteRecords, DefinitionAndSolutionGoToTheirCanonicalPaths) {
  TempDir tmp;
  const Definition d = testing::make_definition(testing::definition_json("d_new", "rmsnorm"));
  const Solution s = testing::make_solution(testing::solution_json("s_new", "d_new", "carol"));
  write_definition(tmp.path(), d);
  write_solution(tmp.path(), s, "rmsnorm");
  EXPECT_EQ(tmp.read("definitions/rmsnorm/d_new.json"), dump_json_pretty(to_json(d)));
  EXPECT_EQ(tmp.read("solutions/carol/rmsnorm/d_new/s_new.json"), dump_json_pretty(to_json(s)));
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  ASSERT_NE(set.definition("d_new"), nullptr);
  EXPECT_EQ(to_json(*set.definition("d_new")), to_json(d));
  ASSERT_NE(set.solution("s_new"), nullptr);
  EXPECT_EQ(to_json(set.solution("s_new")->value), to_json(s));
}

}  // namespace
}  // namespace fib
