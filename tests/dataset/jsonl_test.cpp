// JSONL files: torn last lines, split_jsonl, and append_jsonl (newline repair, rejection of
// multi-line records, no interleaving between concurrent writers).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dataset_fixtures.h"
#include "fib/base/json.h"
#include "fib/dataset/files.h"
#include "fib/dataset/trace_set.h"
#include "support/temp_dir.h"

namespace fib {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const char kIncomplete[] =
    "the last line is incomplete: the file ends in the middle of a record (an interrupted write?)";
const char kIncompleteHint[] = "delete the partial line; the records before it are intact";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

TEST(SplitJsonl, NumbersLinesSkipsBlanksAndMarksTheUnterminatedLast) {
  const auto lines = split_jsonl("a\n\n  \t\nb\r\nc");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].number, 1u);
  EXPECT_EQ(lines[0].text, "a");
  EXPECT_TRUE(lines[0].terminated);
  EXPECT_EQ(lines[1].number, 4u);
  EXPECT_EQ(lines[1].text, "b");  // CRLF: the '\r' is dropped
  EXPECT_TRUE(lines[1].terminated);
  EXPECT_EQ(lines[2].number, 5u);
  EXPECT_EQ(lines[2].text, "c");
  EXPECT_FALSE(lines[2].terminated);

  EXPECT_TRUE(split_jsonl("").empty());
  EXPECT_TRUE(split_jsonl("\n\n").empty());
  const auto one = split_jsonl("x\n");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].terminated);
}

TEST(TornLastLine, IsReportedWithItsLineWhileEarlierRecordsLoad) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  const std::string full = testing::workload_line("d", "u3");
  tmp.write("workloads/gemm/d.jsonl", testing::workload_line("d", "u1") + "\n" +
                                          testing::workload_line("d", "u2") + "\n" +
                                          full.substr(0, full.size() / 2));
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.severity, Severity::kError);
  EXPECT_EQ(d.file, "workloads/gemm/d.jsonl:3");
  EXPECT_EQ(d.message, kIncomplete);
  EXPECT_EQ(d.hint, kIncompleteHint);
  ASSERT_EQ(set.workloads("d").size(), 2u);
  EXPECT_EQ(set.workloads("d")[0].value.workload.uuid, "u1");
  EXPECT_EQ(set.workloads("d")[1].value.workload.uuid, "u2");
  EXPECT_EQ(set.files().back().records, 2u);
}

TEST(TornLastLine, CompleteLastRecordWithoutNewlineLoads) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  tmp.write("workloads/gemm/d.jsonl",
            testing::workload_line("d", "u1") + "\n" + testing::workload_line("d", "u2"));
  const TraceSet set = TraceSet::load(tmp.path());
  EXPECT_TRUE(set.load_diagnostics().empty()) << set.load_diagnostics().to_string();
  ASSERT_EQ(set.workloads("d").size(), 2u);
  EXPECT_EQ(set.workloads("d")[1].value.workload.uuid, "u2");
  EXPECT_EQ(set.workloads("d")[1].source.line, 2u);
}

TEST(TornLastLine, InvalidTerminatedLineIsAPlainJsonError) {
  // A bad line that does end in a newline was not cut short: it gets the parser's message.
  TempDir tmp;
  tmp.write("traces/a/gemm/d.jsonl", "{\"definition\": \n");
  const TraceSet set = TraceSet::load(tmp.path());
  ASSERT_EQ(set.load_diagnostics().size(), 1u);
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.file, "traces/a/gemm/d.jsonl:1");
  EXPECT_NE(d.message, kIncomplete);
  EXPECT_NE(d.message.find("invalid JSON"), std::string::npos) << d.message;
}

TEST(AppendJsonl, AppendsOneLinePerRecordAndCreatesFolders) {
  TempDir tmp;
  const fs::path file = tmp.path() / "traces" / "a" / "gemm" / "d.jsonl";
  append_jsonl(file, std::vector<std::string>{"{\"n\": 1}", "{\"n\": 2}"});
  EXPECT_EQ(tmp.read("traces/a/gemm/d.jsonl"), "{\"n\": 1}\n{\"n\": 2}\n");
  append_jsonl(file, std::vector<std::string>{"{\"n\": 3}"}, /*durable=*/false);
  EXPECT_EQ(tmp.read("traces/a/gemm/d.jsonl"), "{\"n\": 1}\n{\"n\": 2}\n{\"n\": 3}\n");
  append_jsonl(file, std::vector<std::string>{});  // nothing to add: the file is untouched
  EXPECT_EQ(tmp.read("traces/a/gemm/d.jsonl"), "{\"n\": 1}\n{\"n\": 2}\n{\"n\": 3}\n");
}

TEST(AppendJsonl, EmptyRecordListCreatesNothing) {
  TempDir tmp;
  append_jsonl(tmp.path() / "sub" / "x.jsonl", std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(tmp.path() / "sub"));
}

TEST(AppendJsonl, RecordWithANewlineIsRejectedAndNothingIsWritten) {
  TempDir tmp;
  const fs::path file = tmp.write("x.jsonl", "{\"n\": 1}\n");
  try {
    append_jsonl(file, std::vector<std::string>{"{\"n\": 2}", "{\"n\":\n 3}"});
    FAIL() << "a record with a newline was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              file.string() + ": error: a JSONL record must not contain a newline");
  }
  EXPECT_EQ(tmp.read("x.jsonl"), "{\"n\": 1}\n");  // the valid first record was not written
  EXPECT_THROW(append_jsonl(tmp.path() / "new.jsonl", std::vector<std::string>{"\n"}), Error);
  EXPECT_FALSE(fs::exists(tmp.path() / "new.jsonl"));
}

TEST(AppendJsonl, AfterATornLineTheNewRecordStartsOnItsOwnLine) {
  TempDir tmp;
  tmp.write("definitions/gemm/d.json", testing::definition_json("d"));
  const std::string first = testing::workload_line("d", "u1");
  const std::string torn = testing::workload_line("d", "u2").substr(0, 40);
  const std::string added = testing::workload_line("d", "u3");
  tmp.write("workloads/gemm/d.jsonl", first + "\n" + torn);
  append_jsonl(tmp.path() / "workloads/gemm/d.jsonl", std::vector<std::string>{added});
  EXPECT_EQ(tmp.read("workloads/gemm/d.jsonl"), first + "\n" + torn + "\n" + added + "\n");

  const TraceSet set = TraceSet::load(tmp.path());
  // The torn line stays visible to the reader (now terminated, so a JSON error at line 2).
  ASSERT_EQ(set.load_diagnostics().size(), 1u) << set.load_diagnostics().to_string();
  const Diagnostic& d = set.load_diagnostics().items()[0];
  EXPECT_EQ(d.file, "workloads/gemm/d.jsonl:2");
  EXPECT_NE(d.message.find("invalid JSON"), std::string::npos) << d.message;
  ASSERT_EQ(set.workloads("d").size(), 2u);
  EXPECT_EQ(set.workloads("d")[0].value.workload.uuid, "u1");
  EXPECT_EQ(set.workloads("d")[1].value.workload.uuid, "u3");
  EXPECT_EQ(set.workloads("d")[1].source.line, 3u);
}

// Checks that a file holds exactly `writers * per_writer` lines, each a whole record
// {"w": W, "i": I, "pad": "..."} and each (W, I) once.
void expect_whole_records(const std::string& text, int writers, int per_writer) {
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const auto lines = lines_of(text);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(writers * per_writer));
  std::set<std::pair<int, int>> seen;
  for (std::size_t n = 0; n < lines.size(); ++n) {
    Diagnostics diag;
    auto j = parse_json(lines[n], "line " + std::to_string(n + 1), diag);
    ASSERT_TRUE(j) << diag.to_string();
    EXPECT_TRUE(seen.insert({j->at("w").get<int>(), j->at("i").get<int>()}).second);
  }
  EXPECT_EQ(seen.size(), lines.size());
}

std::vector<std::string> records_of_writer(int w, int count, std::size_t pad) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    out.push_back("{\"w\": " + std::to_string(w) + ", \"i\": " + std::to_string(i) +
                  ", \"pad\": \"" + std::string(pad, static_cast<char>('a' + w % 26)) + "\"}");
  }
  return out;
}

TEST(AppendJsonl, ConcurrentThreadsNeverInterleave) {
  TempDir tmp;
  const fs::path file = tmp.path() / "t.jsonl";
  constexpr int kWriters = 6, kPerWriter = 40;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      // Batches of two records, ~70 KB each, so a write cannot be one small atomic chunk.
      const auto recs = records_of_writer(w, kPerWriter, 35000);
      for (int i = 0; i < kPerWriter; i += 2) {
        append_jsonl(file, std::vector<std::string>{recs[i], recs[i + 1]}, /*durable=*/false);
      }
    });
  }
  for (auto& t : threads) t.join();
  expect_whole_records(tmp.read("t.jsonl"), kWriters, kPerWriter);
}

TEST(AppendJsonl, ConcurrentProcessesNeverInterleave) {
  TempDir tmp;
  const fs::path file = tmp.path() / "p.jsonl";
  // Start with a torn line: exactly one writer must repair it, and none may write after it.
  const std::string torn = "{\"torn\": ";
  tmp.write("p.jsonl", torn);
  constexpr int kWriters = 5, kPerWriter = 30;
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      int rc = 0;
      try {
        const auto recs = records_of_writer(w, kPerWriter, 20000);
        for (const auto& r : recs) append_jsonl(file, std::vector<std::string>{r}, false);
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer " << pid << " failed";
  }
  const std::string text = tmp.read("p.jsonl");
  ASSERT_TRUE(text.starts_with(torn + "\n")) << text.substr(0, 40);
  expect_whole_records(text.substr(torn.size() + 1), kWriters, kPerWriter);
}

}  // namespace
}  // namespace fib
