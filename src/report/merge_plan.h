// Deciding which records of several datasets survive a merge: identical duplicates collapse,
// conflicting ones keep the first source, and the rejected source's dependents go with it.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "fib/report/datasets.h"

namespace fib::report::detail {

template <typename T>
struct Pick {
  std::size_t set = 0;  // index of the dataset it comes from
  const Record<T>* record = nullptr;
};

struct MergePlan {
  std::vector<Pick<Definition>> definitions;
  std::vector<Pick<Solution>> solutions;
  std::vector<Pick<Trace>> workloads;
  std::vector<Pick<Trace>> traces;
  std::vector<Conflict> conflicts;
  CombineCounts counts;
};

MergePlan plan_merge(std::span<const TraceSet> sets);

// JSON text with object keys sorted at every level: equal for records with equal content
// whatever their key order or spacing.
std::string canonical_text(const Json& j);

// "<root>/<file>[:line]" for a record of `set`.
std::string source_of(const TraceSet& set, const RecordSource& s);

// Appends a dataset's load findings with their files named under its root.
void append_load_diagnostics(const TraceSet& set, Diagnostics& out);

// Dotted paths (two levels deep at most) where two JSON objects differ.
std::vector<std::string> differing_fields(const Json& a, const Json& b);

}  // namespace fib::report::detail
