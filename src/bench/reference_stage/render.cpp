// The table and the JSON of `fib reference check`.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "fib/bench/reference_stage/reference_check.h"

namespace fib::bench {

namespace {

constexpr std::size_t kReasonWidth = 160;

std::string error_cell(const ReferenceCheckRow& r, double v) {
  return r.workloads > 0 && !r.draws ? fmt::format("{:.3g}", v) : "-";
}

std::string workloads_cell(const ReferenceCheckRow& r) {
  return r.synthesized > 0 ? fmt::format("{} synth", r.workloads) : std::to_string(r.workloads);
}

std::string reason_cell(const ReferenceCheckRow& r) {
  std::string s = r.reason;
  if (s.empty() && r.draws) s = "PyTorch's draws lie in the native distribution's support";
  if (r.left_out > 0) {
    s += fmt::format("{}{} left out: {}", s.empty() ? "" : "; ", r.left_out, r.left_out_reason);
  }
  return s.size() > kReasonWidth ? s.substr(0, kReasonWidth - 3) + "..." : s;
}

}  // namespace

std::string render_reference_check(const ReferenceCheckResult& result) {
  std::size_t wdef = 10, wop = 7;
  for (const auto& r : result.rows) {
    wdef = std::max(wdef, r.definition.size());
    wop = std::max(wop, r.op_type.size());
  }
  std::string out =
      fmt::format("{:<{}}  {:<{}}  {:>9}  {:>11}  {:>11}  {:<8}  {}\n", "definition", wdef,
                  "op type", wop, "workloads", "max abs err", "max rel err", "verdict", "reason");
  std::map<CheckVerdict, int> counts;
  for (const auto& r : result.rows) {
    ++counts[r.verdict];
    out +=
        fmt::format("{:<{}}  {:<{}}  {:>9}  {:>11}  {:>11}  {:<8}  {}\n", r.definition, wdef,
                    r.op_type, wop, workloads_cell(r), error_cell(r, r.max_abs_error),
                    error_cell(r, r.max_rel_error), check_verdict_name(r.verdict), reason_cell(r));
  }
  out += fmt::format(
      "\n{} definitions: {} agree, {} DISAGREE, {} ERROR, {} skipped; PyTorch {} ({}); {:.1f} s\n",
      result.rows.size(), counts[CheckVerdict::kAgree], counts[CheckVerdict::kDisagree],
      counts[CheckVerdict::kError], counts[CheckVerdict::kSkipped], result.torch_version,
      result.python, result.seconds);
  return out;
}

Json to_json(const ReferenceCheckResult& result) {
  Json rows = Json::array();
  for (const auto& r : result.rows) {
    rows.push_back(Json{{"definition", r.definition},
                        {"op_type", r.op_type},
                        {"native", r.native},
                        {"workloads", r.workloads},
                        {"synthesized", r.synthesized},
                        {"disagreeing", r.disagreeing},
                        {"left_out", r.left_out},
                        {"max_abs_error", r.max_abs_error},
                        {"max_rel_error", r.max_rel_error},
                        {"draws", r.draws},
                        {"verdict", std::string(check_verdict_name(r.verdict))},
                        {"reason", r.reason},
                        {"left_out_reason", r.left_out_reason}});
  }
  return Json{{"python", result.python},
              {"torch", result.torch_version},
              {"seconds", result.seconds},
              {"all_agree", result.all_agree()},
              {"rows", rows}};
}

}  // namespace fib::bench
