// The three known mismatches between FlashInfer's trace-template dumps and the
// FlashInfer-Trace definition schema, repaired mechanically.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <regex>

#include "fib/import/import.h"

namespace fib::import {
namespace {

// Index tensors a wrapper receives in plan(), not run(): the dumper inspects run()'s arguments
// only, so their dtype comes out "unknown". FlashInfer's plan() takes them as int32.
constexpr std::array<std::string_view, 8> kPlanIndexTensors = {"kv_indptr",
                                                               "kv_indices",
                                                               "qo_indptr",
                                                               "paged_kv_indptr",
                                                               "paged_kv_indices",
                                                               "kv_last_page_len",
                                                               "paged_kv_last_page_len",
                                                               "kv_len_arr"};

// The templates name the reference `_<name>_reference`; the schema calls a top-level `run`.
void repair_reference(Json& j, std::vector<std::string>& notes) {
  auto it = j.find("reference");
  if (it == j.end() || !it->is_string()) return;
  const std::string ref = it->get<std::string>();
  static const std::regex kRun(R"((^|\n)def run\s*\()");
  if (std::regex_search(ref, kRun)) return;
  static const std::regex kNamed(R"((^|\n)def (_[A-Za-z0-9_]*_reference)\s*\()");
  std::smatch m;
  if (!std::regex_search(ref, m, kNamed)) return;
  const std::string name = m[2].str();
  const auto at = static_cast<std::size_t>(m.position(2));
  *it = ref.substr(0, at) + "run" + ref.substr(at + name.size());
  notes.push_back(fmt::format("$.reference: renamed def {} to def run", name));
}

void repair_index_dtypes(Json& j, std::vector<std::string>& notes) {
  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_object()) return;
  for (auto& [name, spec] : inputs->items()) {
    if (!spec.is_object() || spec.value("dtype", Json()) != "unknown") continue;
    if (std::find(kPlanIndexTensors.begin(), kPlanIndexTensors.end(), name) ==
        kPlanIndexTensors.end())
      continue;
    spec["dtype"] = "int32";
    notes.push_back(
        fmt::format("$.inputs.{}.dtype: unknown -> int32 (a plan-time index tensor)", name));
  }
}

// In-place ops list the updated tensor as input and output; the reference returns only the
// others, so the output entry is the one dropped.
void repair_in_place(Json& j, std::vector<std::string>& notes) {
  auto inputs = j.find("inputs");
  auto outputs = j.find("outputs");
  if (inputs == j.end() || outputs == j.end() || !inputs->is_object() || !outputs->is_object())
    return;
  std::vector<std::string> both;
  for (const auto& [name, spec] : outputs->items())
    if (inputs->contains(name)) both.push_back(name);
  for (const std::string& name : both) {
    outputs->erase(name);
    notes.push_back(fmt::format("$.outputs.{}: dropped (also an input, updated in place)", name));
  }
}

}  // namespace

std::vector<std::string> repair_definition(Json& j) {
  std::vector<std::string> notes;
  if (!j.is_object()) return notes;
  repair_reference(j, notes);
  repair_index_dtypes(j, notes);
  repair_in_place(j, notes);
  return notes;
}

}  // namespace fib::import
