// Small FlashInfer-Trace records for dataset tests, written as JSON text the way files hold them,
// and helpers to turn them into the schema types.
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fib/base/diagnostics.h"
#include "fib/base/json.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/solution.h"
#include "fib/trace/trace.h"

namespace fib::testing {

// A gemm definition (C = A @ B.T, M var, N=4, K=8) named `name`, as a pretty JSON file.
inline std::string definition_json(std::string_view name, std::string_view op_type = "gemm",
                                   std::string_view tags = R"("status:verified")") {
  return fmt::format(R"JSON({{
  "name": "{}",
  "op_type": "{}",
  "tags": [{}],
  "axes": {{
    "M": {{ "type": "var" }},
    "N": {{ "type": "const", "value": 4 }},
    "K": {{ "type": "const", "value": 8 }}
  }},
  "inputs": {{
    "A": {{ "shape": ["M", "K"], "dtype": "float16" }},
    "B": {{ "shape": ["N", "K"], "dtype": "float16" }}
  }},
  "outputs": {{
    "C": {{ "shape": ["M", "N"], "dtype": "float16" }}
  }},
  "reference": "import torch\n\ndef run(A, B):\n    return torch.matmul(A, B.T)"
}}
)JSON",
                     name, op_type, tags);
}

inline std::string workload_object(std::string_view uuid, int m) {
  return fmt::format(
      R"({{"uuid": "{}", "axes": {{"M": {}}}, "inputs": {{"A": {{"type": "random"}}, "B": {{"type": "random"}}}}}})",
      uuid, m);
}

// One workload record (a JSONL line without the newline).
inline std::string workload_line(std::string_view definition, std::string_view uuid, int m = 1) {
  return fmt::format(
      R"({{"definition": "{}", "solution": null, "workload": {}, "evaluation": null}})", definition,
      workload_object(uuid, m));
}

// One PASSED evaluation trace with the given latency (speedup over a 2 ms reference; 0 when
// the latency is 0).
inline std::string passed_trace_line(std::string_view definition, std::string_view uuid,
                                     std::string_view solution, double latency_ms, int m = 1) {
  return fmt::format(
      R"({{"definition": "{}", "workload": {}, "solution": "{}", "evaluation": {{"status": "PASSED", )"
      R"("environment": {{"hardware": "NVIDIA H100", "libs": {{"torch": "2.8.0"}}}}, )"
      R"("timestamp": "2025-01-01T00:00:00Z", "log": "", )"
      R"("correctness": {{"max_relative_error": 0.001, "max_absolute_error": 0.0005}}, )"
      R"("performance": {{"latency_ms": {}, "reference_latency_ms": 2.0, "speedup_factor": {}}}}}}})",
      definition, workload_object(uuid, m), solution, latency_ms,
      latency_ms > 0 ? 2.0 / latency_ms : 0.0);
}

// A failed evaluation (no correctness, no performance) with the given status.
inline std::string failed_trace_line(std::string_view definition, std::string_view uuid,
                                     std::string_view solution,
                                     std::string_view status = "RUNTIME_ERROR") {
  return fmt::format(
      R"({{"definition": "{}", "workload": {}, "solution": "{}", "evaluation": {{"status": "{}", )"
      R"("environment": {{"hardware": "NVIDIA H100", "libs": {{}}}}, )"
      R"("timestamp": "2025-01-01T00:00:00Z", "log": "boom"}}}})",
      definition, workload_object(uuid, 1), solution, status);
}

// An INCORRECT_NUMERICAL evaluation: correctness but no performance.
inline std::string numerical_trace_line(std::string_view definition, std::string_view uuid,
                                        std::string_view solution) {
  return fmt::format(
      R"({{"definition": "{}", "workload": {}, "solution": "{}", "evaluation": {{"status": )"
      R"("INCORRECT_NUMERICAL", "environment": {{"hardware": "NVIDIA H100", "libs": {{}}}}, )"
      R"("timestamp": "2025-01-01T00:00:00Z", "log": "", )"
      R"("correctness": {{"max_relative_error": 5.0, "max_absolute_error": 3.0}}}}}})",
      definition, workload_object(uuid, 1), solution);
}

inline std::string solution_json(std::string_view name, std::string_view definition,
                                 std::string_view author) {
  return fmt::format(R"({{
  "name": "{}",
  "definition": "{}",
  "author": "{}",
  "spec": {{
    "language": "cuda",
    "target_hardware": ["NVIDIA H100"],
    "entry_point": "main.cu::run",
    "dependencies": []
  }},
  "sources": [{{ "path": "main.cu", "content": "// kernel\n" }}]
}}
)",
                     name, definition, author);
}

// Parses text into a schema type, failing the test (by throwing) when it does not parse.
inline Json parse_or_throw(std::string_view text) {
  Diagnostics diag;
  auto j = parse_json(text, "fixture", diag);
  if (!j) throw Error(diag);
  return *j;
}
inline Trace make_trace(std::string_view line) {
  Diagnostics diag;
  ReadContext ctx{"fixture", &diag};
  auto t = trace_from_json(parse_or_throw(line), ctx);
  if (!t || diag.has_errors()) throw Error(diag);
  return *t;
}
inline Definition make_definition(std::string_view text) {
  Diagnostics diag;
  ReadContext ctx{"fixture", &diag};
  auto d = definition_from_json(parse_or_throw(text), ctx);
  if (!d || diag.has_errors()) throw Error(diag);
  return *d;
}
inline Solution make_solution(std::string_view text) {
  Diagnostics diag;
  ReadContext ctx{"fixture", &diag};
  auto s = solution_from_json(parse_or_throw(text), ctx);
  if (!s || diag.has_errors()) throw Error(diag);
  return *s;
}

}  // namespace fib::testing
