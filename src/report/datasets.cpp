#include "fib/report/datasets.h"

#include <fmt/format.h>

#include "report/merge_plan.h"

namespace fib::report {

std::string Conflict::to_string() const {
  std::string s = fmt::format("{} '{}': kept {}, dropped {}", kind, name, kept, rejected);
  if (!differing.empty()) s += fmt::format(" (differs in: {})", fmt::join(differing, ", "));
  if (dependents_dropped > 0) {
    s += fmt::format("; {} record(s) of the same dataset that depend on it dropped too",
                     dependents_dropped);
  }
  return s;
}

Json to_json(const Conflict& c) {
  Json j;
  j["kind"] = c.kind;
  j["name"] = c.name;
  j["kept"] = c.kept;
  j["rejected"] = c.rejected;
  j["differing"] = c.differing;
  j["dependents_dropped"] = c.dependents_dropped;
  return j;
}

Datasets Datasets::load(std::span<const std::filesystem::path> roots, const LoadOptions& options) {
  if (roots.empty()) {
    throw Error("--dataset", "no dataset folder given",
                "pass --dataset DIR (repeatable; --local is its alias) or set FIB_DATASET_PATH");
  }
  Datasets d;
  for (const auto& root : roots) d.sets_.push_back(TraceSet::load(root, options));
  if (d.sets_.size() == 1) return d;

  detail::MergePlan plan = detail::plan_merge(d.sets_);
  TraceSet combined(d.sets_.front().root());
  for (const auto& p : plan.definitions) combined.add_definition(p.record->value);
  for (const auto& p : plan.solutions) combined.add_solution(p.record->value);
  for (const auto& p : plan.workloads) combined.add_workload(p.record->value);
  for (const auto& p : plan.traces) combined.add_trace(p.record->value);
  d.combined_ = std::move(combined);
  d.conflicts_ = std::move(plan.conflicts);
  d.counts_ = plan.counts;
  return d;
}

Diagnostics Datasets::diagnostics() const {
  Diagnostics out;
  for (const auto& set : sets_) detail::append_load_diagnostics(set, out);
  for (const auto& c : conflicts_) {
    out.warning(c.rejected, {}, fmt::format("conflict: {}", c.to_string()),
                "the record from the folder given first is used");
  }
  return out;
}

std::string render_diagnostics(const Diagnostics& diag, std::size_t limit) {
  std::string out;
  std::size_t shown = 0;
  for (const auto& d : diag) {
    if (shown == limit) break;
    out += d.to_string();
    out += '\n';
    ++shown;
  }
  if (diag.size() > shown) {
    out += fmt::format("... and {} more (fib validate lists them all)\n", diag.size() - shown);
  }
  return out;
}

}  // namespace fib::report
