// Every corpus file loads and writes back to equal JSON (including key order).
#include <gtest/gtest.h>

#include <filesystem>

#include "fib/base/json.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/trace.h"
#include "support/test_paths.h"

namespace fib {
namespace {

namespace fs = std::filesystem;

TEST(CorpusRoundTrip, EveryDefinitionLoadsAndWritesBackEqual) {
  FIB_REQUIRE_CORPUS(corpus);
  int count = 0;
  for (const auto& e : fs::recursive_directory_iterator(corpus / "definitions")) {
    if (e.path().extension() != ".json") continue;
    Diagnostics diag;
    auto j = read_json_file(e.path().string(), diag);
    ASSERT_TRUE(j) << diag.to_string();
    ReadContext ctx{e.path().string(), &diag};
    auto d = definition_from_json(*j, ctx);
    ASSERT_TRUE(d) << diag.to_string();
    EXPECT_TRUE(diag.empty()) << diag.to_string();
    EXPECT_EQ(to_json(*d), *j) << e.path();
    ++count;
  }
  EXPECT_EQ(count, 136);
}

TEST(CorpusRoundTrip, EveryWorkloadLineLoadsAndWritesBackEqual) {
  FIB_REQUIRE_CORPUS(corpus);
  int count = 0;
  for (const auto& e : fs::recursive_directory_iterator(corpus / "workloads")) {
    if (e.path().extension() != ".jsonl") continue;
    Diagnostics diag;
    auto text = read_text_file(e.path().string(), diag);
    ASSERT_TRUE(text);
    std::size_t pos = 0;
    while (pos < text->size()) {
      std::size_t nl = text->find('\n', pos);
      if (nl == std::string::npos) nl = text->size();
      std::string_view line(text->data() + pos, nl - pos);
      pos = nl + 1;
      if (line.empty()) continue;
      auto j = parse_json(line, e.path().string(), diag);
      ASSERT_TRUE(j) << diag.to_string();
      ReadContext ctx{e.path().string(), &diag};
      auto t = trace_from_json(*j, ctx);
      ASSERT_TRUE(t) << diag.to_string();
      EXPECT_TRUE(t->is_workload_trace());
      EXPECT_EQ(to_json(*t), *j);
      ++count;
    }
  }
  EXPECT_EQ(count, 663);
}

}  // namespace
}  // namespace fib
