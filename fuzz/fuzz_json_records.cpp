// Fuzz target: arbitrary bytes -> parse_json -> every FlashInfer-Trace record reader.
//
// The input is one JSON document. An object is read as a definition, a solution and a trace
// (workload record or evaluation trace). An array [first, rest...] reads every element that way
// and additionally checks the workloads of `rest` against the definition `first` (or, when
// `first` is not a definition, against a small built-in one), so definitions with fuzzed axes
// and constraints meet fuzzed workloads.
//
// Invariants (a violation aborts, which libFuzzer records as a crash):
//  - no reader throws, and a reader that refuses a record reports at least one error;
//  - what a reader accepts can be written (to_json, pretty and one-line dump), read back, and
//    written again to the same JSON (a round trip is a fixed point);
//  - a one-line dump holds no newline (it must be a valid JSONL record).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fib/base/json.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/solution.h"
#include "fib/trace/trace.h"
#include "fib/trace/workload.h"
#include "fuzz_common.h"

namespace {

using fib::Json;
using fib::fuzz::check;
using fib::fuzz::die;

constexpr std::string_view kBuiltinDefinition = R"json({
  "name": "fuzz_paged_decode",
  "op_type": "gqa_paged",
  "tags": ["model:fuzz", "status:verified"],
  "axes": {
    "batch_size": {"type": "var"},
    "len_indptr": {"type": "var"},
    "num_kv_indices": {"type": "var"},
    "num_pages": {"type": "var"},
    "page_size": {"type": "const", "value": 1},
    "num_heads": {"type": "const", "value": 8},
    "head_dim": {"type": "const", "value": 64}
  },
  "constraints": ["len_indptr == batch_size + 1",
                  "num_kv_indices == kv_indptr[-1].item()",
                  "num_pages * page_size >= num_kv_indices",
                  "q.shape[1] % num_heads == 0 and len(kv_indptr) > 1"],
  "inputs": {
    "q": {"shape": ["batch_size", "num_heads", "head_dim"], "dtype": "bfloat16"},
    "kv_cache": {"shape": ["num_pages", "page_size", "head_dim"], "dtype": "bfloat16"},
    "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
    "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
    "bias": {"shape": ["num_heads"], "dtype": "float32", "optional": true},
    "sm_scale": {"shape": null, "dtype": "float32"},
    "causal": {"shape": null, "dtype": "bool"}
  },
  "outputs": {"output": {"shape": ["batch_size", "num_heads", "head_dim"], "dtype": "bfloat16"}},
  "reference": "def run(q, kv_cache, kv_indptr, kv_indices, bias, sm_scale, causal):\n    return q\n"
})json";

const fib::Definition& builtin_definition() {
  static const fib::Definition def = [] {
    fib::Diagnostics diag;
    auto j = fib::parse_json(kBuiltinDefinition, "builtin", diag);
    if (!j) die("the built-in definition does not parse", diag.to_string());
    fib::ReadContext ctx{"builtin", &diag};
    auto d = fib::definition_from_json(*j, ctx);
    if (!d || diag.has_errors()) die("the built-in definition is invalid", diag.to_string());
    return std::move(*d);
  }();
  return def;
}

// Writes `value`, reads it back with `read`, and checks the second write equals the first.
template <typename T, typename ReadFn>
void check_round_trip(const T& value, ReadFn read, std::string_view kind) {
  const Json first = to_json(value);
  for (const bool pretty : {true, false}) {
    const std::string text = pretty ? fib::dump_json_pretty(first) : fib::dump_json_line(first);
    if (!pretty)
      check(text.find('\n') == std::string::npos, "a one-line dump holds a newline", text);
    fib::Diagnostics diag;
    auto reparsed = fib::parse_json(text, "roundtrip", diag);
    if (!reparsed)
      die(std::string(kind) + ": written JSON does not parse", diag.to_string() + text);
    check(*reparsed == first, std::string(kind) + ": dump + parse changed the JSON", text);
    fib::ReadContext ctx{"roundtrip", &diag};
    auto again = read(*reparsed, ctx);
    if (!again) die(std::string(kind) + ": written record is refused", diag.to_string() + text);
    const Json second = to_json(*again);
    if (second != first) {
      die(std::string(kind) + ": round trip is not a fixed point",
          "first:  " + first.dump() + "\nsecond: " + second.dump());
    }
  }
}

// Exercises a definition's helpers, and its constraints against made-up axis values.
void exercise_definition(const fib::Definition& d, const fib::ReadContext& ctx) {
  fib::check_definition_reference(d, ctx);
  check(d.parsed_constraints.size() == d.constraints.size(), "constraints not all parsed");
  (void)d.input_names();
  (void)d.tag_values("model:");
  (void)d.has_tag("status:verified");
  fib::AxisValues vars;
  std::int64_t v = 1;
  for (const auto& name : d.var_axes()) vars.emplace_back(name, v++);
  auto bound = d.bind_axes(vars);
  if (!bound) die("bind_axes failed with every var axis given");
  for (const auto& spec : d.inputs) {
    check(d.input(spec.name) != nullptr, "input lookup");
    auto shape = d.concrete_shape(spec, *bound);
    check(shape.has_value(), "a shape axis of an accepted definition is unbound", spec.name);
  }
  for (const auto& spec : d.outputs) (void)d.concrete_shape(spec, *bound);
  fib::WorkloadConstraintEnv env(
      d, *bound,
      [](std::string_view name, std::span<const std::int64_t> index) -> std::optional<fib::Scalar> {
        if (name.size() % 3 == 0) return std::nullopt;  // some contents are not at hand
        std::int64_t s = static_cast<std::int64_t>(name.size());
        for (auto i : index) s = s * 31 + (i & 0xFFFF);
        return fib::Scalar{s % 1000};
      });
  for (const auto& c : d.parsed_constraints) (void)c.evaluate(env);
}

void exercise_solution(const fib::Solution& s) {
  for (const auto& src : s.sources) {
    std::string why;
    check(fib::is_safe_relative_path(src.path, &why), "an accepted source path is unsafe",
          src.path);
    check(s.source(src.path) != nullptr, "source lookup");
  }
  check(s.source(s.spec.entry_file()) != nullptr, "entry file missing from an accepted solution");
  check(!s.spec.entry_symbol().empty(), "empty entry symbol accepted");
  (void)s.spec.dps();
}

void exercise_trace(const fib::Trace& t) {
  (void)t.passed();
  check(t.is_workload_trace() == (!t.solution && !t.evaluation), "is_workload_trace");
  if (t.evaluation) {
    const auto name = fib::status_name(t.evaluation->status);
    check(fib::parse_status(name) == t.evaluation->status, "status name round trip");
  }
  for (const auto& in : t.workload.inputs) {
    check(t.workload.input(in.name) != nullptr, "workload input lookup");
    (void)fib::input_kind_name(in.kind);
  }
}

// Reads `j` as each kind of record. Returns the definition when it is one.
std::optional<fib::Definition> read_all(const Json& j, const fib::Definition& against) {
  std::optional<fib::Definition> out;
  {
    fib::Diagnostics diag;
    fib::ReadContext ctx{"definitions/x/fuzz.json", &diag};
    auto d = fib::definition_from_json(j, ctx);
    if (!d) {
      check(diag.has_errors(), "definition refused without an error");
    } else {
      exercise_definition(*d, ctx);
      check_round_trip(*d, fib::definition_from_json, "definition");
      out = std::move(d);
    }
    (void)diag.to_string();
  }
  {
    fib::Diagnostics diag;
    fib::ReadContext ctx{"solutions/a/x/d/fuzz.json", &diag};
    auto s = fib::solution_from_json(j, ctx);
    if (!s) {
      check(diag.has_errors(), "solution refused without an error");
    } else {
      exercise_solution(*s);
      check_round_trip(*s, fib::solution_from_json, "solution");
    }
    (void)diag.to_string();
  }
  {
    fib::Diagnostics diag;
    fib::ReadContext ctx{"traces/a/x/fuzz.jsonl:1", &diag};
    auto t = fib::trace_from_json(j, ctx);
    if (!t) {
      check(diag.has_errors(), "trace refused without an error");
    } else {
      exercise_trace(*t);
      check_round_trip(*t, fib::trace_from_json, "trace");
      fib::Diagnostics wdiag;
      fib::ReadContext wctx{"workloads/x/fuzz.jsonl:1", &wdiag};
      const bool ok =
          fib::check_workload(against, t->workload, fib::JsonPath().key("workload"), wctx);
      check(ok || wdiag.has_errors(), "workload rejected without an error");
      (void)wdiag.to_string();
    }
    (void)diag.to_string();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fib::Diagnostics diag;
  std::optional<Json> j;
  try {
    j = fib::parse_json(text, "fuzz.json", diag);
  } catch (const std::exception& e) {
    die("parse_json threw", e.what());
  }
  if (!j) {
    check(diag.has_errors(), "parse_json failed without an error");
    return 0;
  }
  try {
    if (j->is_array() && !j->empty() && j->size() <= 16) {
      auto def = read_all((*j)[0], builtin_definition());
      const fib::Definition& against = def ? *def : builtin_definition();
      for (std::size_t i = 1; i < j->size(); ++i) read_all((*j)[i], against);
    } else {
      read_all(*j, builtin_definition());
    }
  } catch (const std::exception& e) {
    die("a record reader threw", e.what());
  }
  return 0;
}
