// The layout check: every record sits at the path the dataset layout gives it, and the blobs
// workloads refer to are present. A record elsewhere under its top folder is a warning, not an
// error: upstream's TraceSet loads every .json under definitions/ and solutions/ and every .jsonl
// under workloads/ and traces/ wherever it sits, and so does fib, so such a dataset is usable.
#include <fmt/format.h>

#include <set>

#include "fib/dataset/blob.h"
#include "fib/dataset/layout.h"
#include "fib/trace/suggest.h"
#include "validate/checks.h"

namespace fib::validate::detail {

namespace {

std::string file_of(const TraceSet& set, const RecordSource& s) {
  return s.file < set.files().size() ? set.files()[s.file].path : std::string();
}

// Workload or trace records of one definition stored away from their canonical file, grouped
// by (file, owner) so that a file of many such records is one finding, located at the first.
class MisplacedRecords {
 public:
  void add(const std::string& file, const std::string& owner, const std::string& first_id,
           const std::string& where) {
    for (auto& g : groups_) {
      if (g.file == file && g.owner == owner) {
        ++g.count;
        return;
      }
    }
    groups_.push_back({file, owner, first_id, where, 1});
  }
  // One warning per group: `one(group)` words a single record, `many(group)` several.
  template <typename One, typename Many>
  void report(CheckResult& result, One one, Many many) const {
    for (const auto& g : groups_) {
      result.add(message(Severity::kWarning, g.count == 1 ? one(g) : many(g), g.where));
    }
  }
  struct Group {
    std::string file, owner, first_id, where;
    std::size_t count = 0;
  };

 private:
  std::vector<Group> groups_;
};

}  // namespace

void check_layout(Context& ctx) {
  const TraceSet& set = ctx.set;
  for (const auto& r : set.definitions()) {
    const Definition& d = r.value;
    const std::string expected = layout::definition_file(d.op_type, d.name).generic_string();
    const std::string actual = file_of(set, r.source);
    if (!actual.empty() && actual != expected) {
      ctx.result(d.name, Check::kLayout)
          .add(message(Severity::kWarning,
                       fmt::format("definition '{}' of op_type '{}' is stored at {}, expected {}",
                                   d.name, d.op_type, actual, expected),
                       actual, {}, "loaded from there; move the file, or fix its name/op_type"));
    }
    for (const char* bad : {"/", "\\"}) {
      if (d.name.find(bad) != std::string::npos || d.op_type.find(bad) != std::string::npos) {
        ctx.result(d.name, Check::kLayout)
            .add(message(Severity::kError, "name and op_type must not contain path separators",
                         actual));
      }
    }
  }

  std::vector<std::string> def_names;
  for (const auto& r : set.definitions()) def_names.push_back(r.value.name);
  std::set<std::string> reported_orphans;
  auto orphan = [&](const std::string& def, const std::string& where, const char* what) {
    if (!reported_orphans.insert(def + "|" + what).second) return;
    ctx.dataset.add(
        message(Severity::kError,
                fmt::format("{} refer to definition '{}', which is not in the dataset", what, def),
                where, {}, suggest(def, def_names)));
  };

  std::size_t blob_refs = 0, blob_workloads = 0;
  for (const auto& name : def_names) {
    const Definition* d = set.definition(name);
    const std::string expected = layout::workloads_file(d->op_type, d->name).generic_string();
    MisplacedRecords misplaced;
    for (const auto& w : set.workloads(name)) {
      const std::string file = file_of(set, w.source);
      if (file != expected) misplaced.add(file, name, w.value.workload.uuid, set.where(w.source));
      bool has_blob = false;
      for (const auto& in : w.value.workload.inputs) {
        if (in.kind != InputKind::kSafetensors) continue;
        has_blob = true;
        ++blob_refs;
        if (!ctx.has_blob_folder) continue;  // reported once for the dataset below
        const BlobLocation loc = locate_blob(set.root(), in.path);
        if (loc.state == BlobState::kOk) continue;
        const Severity level =
            loc.state == BlobState::kLfsPointer ? Severity::kWarning : Severity::kError;
        ctx.result(name, Check::kLayout)
            .add(message(level, loc.message, set.where(w.source),
                         JsonPath().key("workload").key("inputs").key(in.name).key("path").str()));
      }
      blob_workloads += has_blob ? 1 : 0;
    }
    misplaced.report(
        ctx.result(name, Check::kLayout),
        [&](const MisplacedRecords::Group& g) {
          return fmt::format("workload {} of '{}' is stored in {}, expected {}", g.first_id, name,
                             g.file, expected);
        },
        [&](const MisplacedRecords::Group& g) {
          return fmt::format("{} workloads of '{}' (the first: {}) are stored in {}, expected {}",
                             g.count, name, g.first_id, g.file, expected);
        });
  }
  if (!ctx.has_blob_folder && blob_refs > 0) {
    ctx.dataset.add(message(
        Severity::kInfo,
        fmt::format("the dataset has no blob/ folder: {} safetensors inputs of {} "
                    "workloads are not present here (upstream distributes blobs "
                    "separately from the JSON)",
                    blob_refs, blob_workloads),
        "blob/", {},
        "fetch the blobs to check them and to run those workloads on their recorded tensors"));
  }

  // Records whose definition is missing, and files outside the layout.
  for (const auto& name : set.orphan_definition_names()) {
    if (!set.workloads(name).empty())
      orphan(name, file_of(set, set.workloads(name).front().source), "workloads");
    if (!set.solutions(name).empty())
      orphan(name, file_of(set, set.solutions(name).front().source), "solutions");
    if (!set.traces(name).empty())
      orphan(name, file_of(set, set.traces(name).front().source), "traces");
  }
  for (const auto& s : set.definitions()) {
    for (const auto& sol : set.solutions(s.value.name)) {
      const Solution& v = sol.value;
      const std::string expected =
          layout::solution_file(v.author, s.value.op_type, v.definition, v.name).generic_string();
      const std::string actual = file_of(set, sol.source);
      if (actual != expected) {
        ctx.result(s.value.name, Check::kLayout)
            .add(message(Severity::kWarning,
                         fmt::format("solution '{}' (author '{}') is stored at {}, expected {}",
                                     v.name, v.author, actual, expected),
                         actual, {},
                         "loaded from there; fib writes "
                         "solutions/<author>/<op_type>/<definition>/<name>.json"));
      }
    }
    MisplacedRecords misplaced;
    for (const auto& t : set.traces(s.value.name)) {
      if (!t.value.solution) continue;
      const auto* sol = set.solution(*t.value.solution);
      if (sol == nullptr) continue;  // reported by the trace check
      const std::string expected =
          layout::traces_file(sol->value.author, s.value.op_type, s.value.name).generic_string();
      const std::string actual = file_of(set, t.source);
      if (actual != expected) misplaced.add(actual, sol->value.name, "", set.where(t.source));
    }
    auto trace_words = [&](const MisplacedRecords::Group& g, const std::string& what) {
      const Solution& v = set.solution(g.owner)->value;
      return fmt::format(
          "{} of solution '{}' (author '{}') {} stored in {}, expected {}", what, v.name, v.author,
          what == "trace" ? "is" : "are", g.file,
          layout::traces_file(v.author, s.value.op_type, s.value.name).generic_string());
    };
    misplaced.report(
        ctx.result(s.value.name, Check::kLayout),
        [&](const MisplacedRecords::Group& g) { return trace_words(g, "trace"); },
        [&](const MisplacedRecords::Group& g) {
          return trace_words(g, fmt::format("{} traces", g.count));
        });
  }
  for (const auto& f : set.files()) {
    if (f.kind != FileKind::kOther) continue;
    const auto owner = owner_of(f.path);
    Message m =
        message(Severity::kWarning, "stray file ignored: not a record file of the dataset layout",
                f.path, {}, "definitions and solutions are .json, workloads and traces .jsonl");
    if (!owner.definition.empty() && set.definition(owner.definition)) {
      ctx.result(owner.definition, Check::kLayout).add(std::move(m));
    } else {
      ctx.dataset.add(std::move(m));
    }
  }
}

}  // namespace fib::validate::detail
