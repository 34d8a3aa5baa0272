// Small datasets for the apply tests, written to disk through the dataset library: definitions,
// solutions, and traces signed (or not) as `fib run` signs them, carrying the solution digest.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include "fib/apply/table.h"
#include "fib/base/json.h"
#include "fib/dataset/trace_set.h"
#include "fib/trace/signature.h"
#include "fib/trace/solution_digest.h"
#include "support/temp_dir.h"

namespace fib::apply::testing {

inline Json parse_or_fail(const std::string& text) {
  Diagnostics diag;
  auto j = parse_json(text, "(test)", diag);
  EXPECT_TRUE(j) << diag.to_string();
  return j ? *j : Json();
}

inline SigningKey key_of(std::uint8_t fill) {
  std::array<std::uint8_t, 32> seed{};
  seed.fill(fill);
  return SigningKey::from_seed(seed);
}

// What one trace says, beyond its solution, axes and status.
struct TraceSpec {
  double latency_ms = 1.0;
  double reference_latency_ms = 10.0;
  double max_abs_error = 1e-3;
  double max_rel_error = 0.5;
  std::optional<double> nmse = 1e-5;
  bool with_digest = true;
  std::string build_key = "00aa11bb22cc33dd44ee55ff66778899";
};

class ApplyDataset {
 public:
  explicit ApplyDataset(std::filesystem::path root) : set_(std::move(root)) {}

  const std::filesystem::path& root() const { return set_.root(); }
  // Signs the traces trace() writes from now on (null: unsigned).
  const SigningKey* signer = nullptr;

  void definition(const std::string& name) {
    Json j = parse_or_fail(R"({"name": "", "op_type": "gemm", "description": "test kernel",
      "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}},
      "inputs": {"A": {"shape": ["M", "N"], "dtype": "float32"}},
      "outputs": {"C": {"shape": ["M", "N"], "dtype": "float32"}},
      "reference": "def run(A):\n    return A\n"})");
    j["name"] = name;
    Diagnostics diag;
    auto d = definition_from_json(j, ReadContext{"(test)", &diag});
    ASSERT_TRUE(d) << diag.to_string();
    write_definition(root(), *d);
    set_.add_definition(std::move(*d));
  }

  static Solution make_solution(const std::string& name, const std::string& definition,
                                const std::string& author, const std::string& language,
                                const std::string& source) {
    const bool python = language == "python";
    Json j = parse_or_fail(R"({"name": "", "definition": "", "author": "",
      "spec": {"language": "", "target_hardware": ["cpu"], "entry_point": ""},
      "sources": [{"path": "", "content": ""}]})");
    j["name"] = name;
    j["definition"] = definition;
    j["author"] = author;
    j["spec"]["language"] = language;
    j["spec"]["entry_point"] = python ? "main.py::run" : "main.cpp::run";
    j["sources"][0]["path"] = python ? "main.py" : "main.cpp";
    j["sources"][0]["content"] = source;
    Diagnostics diag;
    auto s = solution_from_json(j, ReadContext{"(test)", &diag});
    EXPECT_TRUE(s) << diag.to_string();
    return *s;
  }

  void solution(const std::string& name, const std::string& definition,
                const std::string& author = "alice", const std::string& language = "cpp",
                const std::string& source = "// kernel") {
    Solution s = make_solution(name, definition, author, language, source);
    write_solution(root(), s, "gemm");
    set_.add_solution(std::move(s));
  }

  // Replaces a solution's record on disk (what a tampering hand does), keeping its name.
  void overwrite_solution(const std::string& name, const std::string& definition,
                          const std::string& source, const std::string& author = "alice") {
    write_solution(root(), make_solution(name, definition, author, "cpp", source), "gemm");
  }

  Trace make_trace(const std::string& definition, const std::string& solution,
                   const std::string& uuid, std::int64_t m, const std::string& status,
                   const TraceSpec& spec) const {
    Json e;
    e["status"] = status;
    Json extra = Json::object();
    extra["build"] = Json{{"key", spec.build_key}};
    if (spec.with_digest) {
      extra[std::string(kSolutionDigestField)] = solution_digest(set_.solution(solution)->value);
    }
    e["environment"] = Json{{"hardware", "cpu"}, {"libs", Json::object()}, {"extra", extra}};
    e["timestamp"] = "2026-01-01T00:00:00";
    e["log"] = "";
    if (status == "PASSED" || status == "INCORRECT_NUMERICAL") {
      Json c{{"max_relative_error", spec.max_rel_error},
             {"max_absolute_error", spec.max_abs_error}};
      if (spec.nmse) c["extra"] = Json{{"policy", "elementwise"}, {"nmse", *spec.nmse}};
      e["correctness"] = c;
    }
    if (status == "PASSED") {
      e["performance"] = Json{{"latency_ms", spec.latency_ms},
                              {"reference_latency_ms", spec.reference_latency_ms},
                              {"speedup_factor", spec.reference_latency_ms / spec.latency_ms}};
    }
    Json j;
    j["definition"] = definition;
    j["solution"] = solution;
    j["workload"] = Json{{"uuid", uuid},
                         {"axes", Json{{"M", m}}},
                         {"inputs", Json{{"A", Json{{"type", "random"}}}}}};
    j["evaluation"] = std::move(e);
    Diagnostics diag;
    auto t = trace_from_json(j, ReadContext{"(test)", &diag});
    EXPECT_TRUE(t) << diag.to_string();
    if (signer != nullptr) sign_trace(*t, *signer);
    return *t;
  }

  void trace(const std::string& definition, const std::string& solution, const std::string& uuid,
             std::int64_t m, const std::string& status = "PASSED", const TraceSpec& spec = {}) {
    const Trace t = make_trace(definition, solution, uuid, m, status, spec);
    append_traces(set_, std::span<const Trace>(&t, 1));
  }

  TraceSet load() const { return TraceSet::load(root()); }

 private:
  TraceSet set_;
};

inline TraceSpec latency(double ms) {
  TraceSpec s;
  s.latency_ms = ms;
  return s;
}

}  // namespace fib::apply::testing
