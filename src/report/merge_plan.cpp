#include "report/merge_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "fib/report/comparison.h"

namespace fib::report::detail {

namespace {

void canonical_into(const Json& j, std::string& out) {
  if (j.is_object()) {
    std::vector<std::pair<const std::string*, const Json*>> items;
    for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(&it.key(), &it.value());
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return *a.first < *b.first; });
    out += '{';
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += ',';
      out += Json(*items[i].first).dump();
      out += ':';
      canonical_into(*items[i].second, out);
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (i > 0) out += ',';
      canonical_into(j[i], out);
    }
    out += ']';
  } else {
    out += j.dump();
  }
}

void diff_into(const Json& a, const Json& b, const std::string& prefix, int depth,
               std::vector<std::string>& out) {
  if (!a.is_object() || !b.is_object() || depth == 0) {
    out.push_back(prefix.empty() ? "(whole record)" : prefix);
    return;
  }
  std::set<std::string> keys;
  for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
  for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
  for (const auto& k : keys) {
    const std::string path = prefix.empty() ? k : prefix + "." + k;
    const bool in_a = a.contains(k), in_b = b.contains(k);
    if (!in_a || !in_b) {
      out.push_back(path);
    } else if (canonical_text(a[k]) != canonical_text(b[k])) {
      diff_into(a[k], b[k], path, depth - 1, out);
    }
  }
}

// A record already kept under some identity.
struct Seen {
  Json json;
  std::string canonical;
  std::string source;
};

}  // namespace

std::string canonical_text(const Json& j) {
  std::string out;
  canonical_into(j, out);
  return out;
}

std::string source_of(const TraceSet& set, const RecordSource& s) {
  return (set.root() / set.where(s)).string();
}

void append_load_diagnostics(const TraceSet& set, Diagnostics& out) {
  for (Diagnostic item : set.load_diagnostics()) {
    item.file = (set.root() / item.file).string();
    out.add(std::move(item));
  }
}

std::vector<std::string> differing_fields(const Json& a, const Json& b) {
  std::vector<std::string> out;
  diff_into(a, b, "", 2, out);
  return out;
}

MergePlan plan_merge(std::span<const TraceSet> sets) {
  MergePlan plan;
  std::map<std::string, Seen> definitions, solutions, workloads;
  std::unordered_map<std::size_t, std::vector<std::size_t>> trace_buckets;

  for (std::size_t si = 0; si < sets.size(); ++si) {
    const TraceSet& set = sets[si];
    // Rejected identities of this dataset, to the index of their conflict.
    std::map<std::string, std::size_t> rejected_definitions, rejected_solutions;
    struct RejectedWorkload {
      std::size_t conflict = 0;
      std::string rejected_workload;  // canonical text of the rejected record's workload
      std::string kept_workload;
    };
    std::map<std::string, RejectedWorkload> rejected_workloads;
    auto drop_dependent = [&](std::size_t conflict) {
      ++plan.conflicts[conflict].dependents_dropped;
      ++plan.counts.dependents_dropped;
    };
    // Whether a record is new (now kept), an identical duplicate, or a conflict (recorded,
    // its index stored in `conflict`).
    constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    enum class Verdict { kNew, kDuplicate, kConflict };
    auto judge = [&](std::map<std::string, Seen>& seen, const char* kind, const std::string& name,
                     Json json, const RecordSource& src, std::size_t& conflict) {
      std::string text = canonical_text(json);
      auto it = seen.find(name);
      if (it == seen.end()) {
        seen.emplace(name, Seen{std::move(json), std::move(text), source_of(set, src)});
        return Verdict::kNew;
      }
      if (it->second.canonical == text) {
        ++plan.counts.identical_duplicates;
        return Verdict::kDuplicate;
      }
      Conflict c;
      c.kind = kind;
      c.name = name;
      c.kept = it->second.source;
      c.rejected = source_of(set, src);
      c.differing = differing_fields(it->second.json, json);
      conflict = plan.conflicts.size();
      plan.conflicts.push_back(std::move(c));
      return Verdict::kConflict;
    };

    const std::vector<std::string> names = definition_names(set);
    for (const auto& r : set.definitions()) {
      std::size_t conflict = kNone;
      switch (
          judge(definitions, "definition", r.value.name, to_json(r.value), r.source, conflict)) {
        case Verdict::kNew:
          plan.definitions.push_back({si, &r});
          break;
        case Verdict::kDuplicate:
          break;
        case Verdict::kConflict:
          rejected_definitions[r.value.name] = conflict;
          break;
      }
    }
    for (const auto& name : names) {
      for (const auto& r : set.solutions(name)) {
        if (auto d = rejected_definitions.find(name); d != rejected_definitions.end()) {
          drop_dependent(d->second);
          continue;
        }
        std::size_t conflict = kNone;
        switch (judge(solutions, "solution", r.value.name, to_json(r.value), r.source, conflict)) {
          case Verdict::kNew:
            plan.solutions.push_back({si, &r});
            break;
          case Verdict::kDuplicate:
            break;
          case Verdict::kConflict:
            rejected_solutions[r.value.name] = conflict;
            break;
        }
      }
    }
    for (const auto& name : names) {
      for (const auto& r : set.workloads(name)) {
        if (auto d = rejected_definitions.find(name); d != rejected_definitions.end()) {
          drop_dependent(d->second);
          continue;
        }
        const std::string& uuid = r.value.workload.uuid;
        std::size_t conflict = kNone;
        switch (judge(workloads, "workload", uuid, to_json(r.value), r.source, conflict)) {
          case Verdict::kNew:
            plan.workloads.push_back({si, &r});
            break;
          case Verdict::kDuplicate:
            break;
          case Verdict::kConflict: {
            const Json& kept = workloads.at(uuid).json;
            rejected_workloads[uuid] = {
                conflict, canonical_text(to_json(r.value.workload)),
                kept.contains("workload") ? canonical_text(kept["workload"]) : std::string()};
            break;
          }
        }
      }
    }
    for (const auto& name : names) {
      for (const auto& r : set.traces(name)) {
        const Trace& t = r.value;
        if (auto d = rejected_definitions.find(name); d != rejected_definitions.end()) {
          drop_dependent(d->second);
          continue;
        }
        if (t.solution) {
          if (auto s = rejected_solutions.find(*t.solution); s != rejected_solutions.end()) {
            drop_dependent(s->second);
            continue;
          }
        }
        // A trace embeds its workload, so it belongs with whichever record it matches.
        if (auto w = rejected_workloads.find(t.workload.uuid); w != rejected_workloads.end()) {
          const std::string embedded = canonical_text(to_json(t.workload));
          if (embedded == w->second.rejected_workload && embedded != w->second.kept_workload) {
            drop_dependent(w->second.conflict);
            continue;
          }
        }
        std::string text = canonical_text(to_json(t));
        auto& bucket = trace_buckets[std::hash<std::string>{}(text)];
        const bool duplicate = std::any_of(bucket.begin(), bucket.end(), [&](std::size_t i) {
          return canonical_text(to_json(plan.traces[i].record->value)) == text;
        });
        if (duplicate) {
          ++plan.counts.duplicate_traces;
          continue;
        }
        bucket.push_back(plan.traces.size());
        plan.traces.push_back({si, &r});
      }
    }
  }
  return plan;
}

}  // namespace fib::report::detail
