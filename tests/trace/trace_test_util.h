// Shared pieces of the trace tests: exact checks on findings and a small paged-attention
// definition (with a constraint, scalars and an optional input) to mutate in failing examples.
#pragma once

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "fib/base/diagnostics.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"

namespace fib::trace_test {

// The file name every test reads its documents under; findings must carry it.
inline constexpr std::string_view kFile = "test.json";

// Parses JSON written in a test. A typo in a literal throws, which fails the test that used it.
inline Json json(std::string_view text) { return Json::parse(text); }

struct Expected {
  Expected(std::string p, std::string m, std::string h = {})
      : path(std::move(p)), message(std::move(m)), hint(std::move(h)) {}
  std::string path;
  std::string message;
  std::string hint;  // empty: the finding must have no hint
};

namespace detail {
inline std::string describe(const Diagnostic& d) {
  return "{file=\"" + d.file + "\", path=\"" + d.path + "\", message=\"" + d.message +
         "\", hint=\"" + d.hint + "\", severity=" + std::string(severity_name(d.severity)) + "}";
}
inline bool matches(const Diagnostic& d, const Expected& e) {
  return d.severity == Severity::kError && d.file == kFile && d.path == e.path &&
         d.message == e.message && d.hint == e.hint;
}
}  // namespace detail

// Passes when `diag` holds exactly one finding: an error in kFile with this path, message and
// hint (an empty hint means "no hint").
inline ::testing::AssertionResult OnlyError(const Diagnostics& diag, const Expected& e) {
  if (diag.size() != 1) {
    return ::testing::AssertionFailure()
           << "expected exactly one finding {path=\"" << e.path << "\", message=\"" << e.message
           << "\", hint=\"" << e.hint << "\"}, got " << diag.size() << ":\n"
           << diag.to_string();
  }
  const Diagnostic& d = diag.items()[0];
  if (!detail::matches(d, e)) {
    return ::testing::AssertionFailure() << "expected {file=\"" << kFile << "\", path=\"" << e.path
                                         << "\", message=\"" << e.message << "\", hint=\"" << e.hint
                                         << "\", severity=error}\n     got " << detail::describe(d);
  }
  return ::testing::AssertionSuccess();
}

// Passes when one of the findings is exactly this error (others may be present).
inline ::testing::AssertionResult HasError(const Diagnostics& diag, const Expected& e) {
  for (const auto& d : diag) {
    if (detail::matches(d, e)) return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no finding {path=\"" << e.path << "\", message=\""
                                       << e.message << "\", hint=\"" << e.hint << "\"} among:\n"
                                       << diag.to_string();
}

// EXPECT_PRED_FORMAT2(Contains, text, part): substring check for long messages.
inline ::testing::AssertionResult Contains(const char* text_expr, const char* part_expr,
                                           std::string_view text, std::string_view part) {
  if (text.find(part) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text_expr << " does not contain " << part_expr
                                       << "\n  text: " << text << "\n  part: " << part;
}

// A paged decode definition shaped like the corpus's gqa_paged ones, small enough to read:
// var and const axes, the corpus constraints on indptr, tensor, scalar (float, int, bool) and
// optional inputs, two outputs, and a decorated reference whose `def run` is on line 5.
inline constexpr std::string_view kPagedDefinition = R"json({
  "name": "paged_decode_test",
  "description": "A small paged decode definition for tests.",
  "op_type": "gqa_paged",
  "tags": ["stage:decode", "model:test-model", "model:other-model", "status:verified"],
  "axes": {
    "batch_size": {"type": "var"},
    "num_qo_heads": {"type": "const", "value": 4, "description": "query heads"},
    "head_dim": {"type": "const", "value": 8},
    "num_pages": {"type": "var"},
    "len_indptr": {"type": "var"},
    "num_kv_indices": {"type": "var"}
  },
  "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
  "inputs": {
    "q": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
    "k_cache": {"shape": ["num_pages", "head_dim"], "dtype": "bfloat16"},
    "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
    "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
    "alibi_slopes": {"shape": ["num_qo_heads"], "dtype": "float32", "optional": true},
    "sm_scale": {"shape": null, "dtype": "float32"},
    "window_left": {"shape": null, "dtype": "int32"},
    "causal": {"shape": null, "dtype": "bool"}
  },
  "outputs": {
    "output": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
    "lse": {"shape": ["batch_size", "num_qo_heads"], "dtype": "float32"}
  },
  "reference": "import torch\n\n\n@torch.no_grad()\ndef run(q, k_cache, kv_indptr, kv_indices, alibi_slopes, sm_scale, window_left, causal):\n    return q, None\n"
})json";

inline Json paged_definition_json() { return json(kPagedDefinition); }

// Parses a definition that must be valid; throws (failing the calling test) otherwise.
inline Definition must_parse_definition(const Json& j) {
  Diagnostics diag;
  ReadContext ctx{std::string(kFile), &diag};
  auto d = definition_from_json(j, ctx);
  if (!d || !diag.empty())
    throw std::runtime_error("definition did not parse:\n" + diag.to_string());
  return std::move(*d);
}

inline Definition paged_definition() { return must_parse_definition(paged_definition_json()); }

}  // namespace fib::trace_test
