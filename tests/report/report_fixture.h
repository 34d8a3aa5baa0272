// Builds small synthetic datasets (definitions, solutions, workloads, traces with chosen
// latencies) on disk through the dataset library, for golden report tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/dataset/trace_set.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/signature.h"
#include "support/temp_dir.h"

namespace fib::report::testing {

inline Json parse_or_fail(const std::string& text) {
  Diagnostics diag;
  auto j = parse_json(text, "(test)", diag);
  EXPECT_TRUE(j) << diag.to_string();
  return j ? *j : Json();
}

class DatasetBuilder {
 public:
  explicit DatasetBuilder(std::filesystem::path root) : set_(std::move(root)) {}

  const std::filesystem::path& root() const { return set_.root(); }

  // Signs the traces trace() writes from now on (null: unsigned).
  const SigningKey* signer = nullptr;

  void definition(const std::string& name, const std::string& op_type = "gemm",
                  const std::string& description = "a test kernel") {
    Json j = parse_or_fail(R"({"name": "", "op_type": "", "description": "",
      "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}},
      "inputs": {"A": {"shape": ["M", "N"], "dtype": "float32"}},
      "outputs": {"C": {"shape": ["M", "N"], "dtype": "float32"}},
      "reference": "def run(A):\n    return A\n"})");
    j["name"] = name;
    j["op_type"] = op_type;
    j["description"] = description;
    Diagnostics diag;
    auto d = definition_from_json(j, ReadContext{"(test)", &diag});
    ASSERT_TRUE(d) << diag.to_string();
    write_definition(root(), *d);
    set_.add_definition(std::move(*d));
  }

  void solution(const std::string& name, const std::string& definition, const std::string& author,
                const std::string& source = "// kernel") {
    Json j = parse_or_fail(R"({"name": "", "definition": "", "author": "",
      "spec": {"language": "cuda", "target_hardware": ["H100"], "entry_point": "main.cu::run"},
      "sources": [{"path": "main.cu", "content": ""}]})");
    j["name"] = name;
    j["definition"] = definition;
    j["author"] = author;
    j["sources"][0]["content"] = source;
    Diagnostics diag;
    auto s = solution_from_json(j, ReadContext{"(test)", &diag});
    ASSERT_TRUE(s) << diag.to_string();
    write_solution(root(), *s, set_.definition(definition)->op_type);
    set_.add_solution(std::move(*s));
  }

  static Json workload_json(const std::string& uuid, int m = 4) {
    Json w =
        parse_or_fail(R"({"uuid": "", "axes": {"M": 0}, "inputs": {"A": {"type": "random"}}})");
    w["uuid"] = uuid;
    w["axes"]["M"] = m;
    return w;
  }

  void workload(const std::string& definition, const std::string& uuid, int m = 4) {
    Json j;
    j["definition"] = definition;
    j["solution"] = nullptr;
    j["workload"] = workload_json(uuid, m);
    j["evaluation"] = nullptr;
    Diagnostics diag;
    auto t = trace_from_json(j, ReadContext{"(test)", &diag});
    ASSERT_TRUE(t) << diag.to_string();
    append_workloads(set_, std::span<const Trace>(&*t, 1));
  }

  // A PASSED trace when status is "PASSED", else a failure of that status.
  void trace(const std::string& definition, const std::string& solution, const std::string& uuid,
             const std::string& status, double latency_ms, double reference_latency_ms = 10.0,
             const std::string& hardware = "NVIDIA H100", int m = 4) {
    Json e;
    e["status"] = status;
    e["environment"] = Json{{"hardware", hardware}, {"libs", Json::object()}};
    e["timestamp"] = "2026-01-01T00:00:00";
    e["log"] = "";
    if (status == "PASSED" || status == "INCORRECT_NUMERICAL") {
      e["correctness"] = Json{{"max_relative_error", 0.001}, {"max_absolute_error", 0.001}};
    }
    if (status == "PASSED") {
      e["performance"] =
          Json{{"latency_ms", latency_ms},
               {"reference_latency_ms", reference_latency_ms},
               {"speedup_factor", latency_ms > 0 ? reference_latency_ms / latency_ms : 0.0}};
    }
    Json j;
    j["definition"] = definition;
    j["solution"] = solution;
    j["workload"] = workload_json(uuid, m);
    j["evaluation"] = std::move(e);
    Diagnostics diag;
    auto t = trace_from_json(j, ReadContext{"(test)", &diag});
    ASSERT_TRUE(t) << diag.to_string();
    if (signer) sign_trace(*t, *signer);
    append_traces(set_, std::span<const Trace>(&*t, 1));
  }

  TraceSet load() const { return TraceSet::load(root()); }

 private:
  TraceSet set_;
};

// The dataset of the golden numbers: definition gemm_a (3 workloads) with a baseline
// solution at 1 ms everywhere; gemm_b (2 workloads) with no baseline solution.
//   gemm_a: alice a_fast 0.5/1/2 ms -> r = 2, 1, 0.5; bob b_sol 0.25 ms on w1, RUNTIME_ERROR
//           on w2, nothing on w3 -> r = 4, 0; carol c_sol 0.5 ms everywhere -> r = 2, 2, 2.
//   gemm_b: alice a_b 1/4 ms with reference 2 ms -> r = 2, 0.5 vs the reference.
inline void build_golden(DatasetBuilder& b) {
  b.definition("gemm_a");
  b.definition("gemm_b");
  for (const char* w : {"w1", "w2", "w3"}) b.workload("gemm_a", w);
  for (const char* w : {"v1", "v2"}) b.workload("gemm_b", w);
  b.solution("base", "gemm_a", "baseline");
  b.solution("a_fast", "gemm_a", "alice");
  b.solution("b_sol", "gemm_a", "bob");
  b.solution("c_sol", "gemm_a", "carol");
  b.solution("a_b", "gemm_b", "alice");
  for (const char* w : {"w1", "w2", "w3"}) b.trace("gemm_a", "base", w, "PASSED", 1.0);
  b.trace("gemm_a", "a_fast", "w1", "PASSED", 0.5);
  b.trace("gemm_a", "a_fast", "w2", "PASSED", 1.0);
  b.trace("gemm_a", "a_fast", "w3", "PASSED", 2.0);
  b.trace("gemm_a", "b_sol", "w1", "PASSED", 0.25);
  b.trace("gemm_a", "b_sol", "w2", "RUNTIME_ERROR", 0);
  for (const char* w : {"w1", "w2", "w3"}) b.trace("gemm_a", "c_sol", w, "PASSED", 0.5);
  b.trace("gemm_b", "a_b", "v1", "PASSED", 1.0, 2.0);
  b.trace("gemm_b", "a_b", "v2", "PASSED", 4.0, 2.0);
}

}  // namespace fib::report::testing
