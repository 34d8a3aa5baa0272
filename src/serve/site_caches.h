// What SiteApi keeps between requests: the reports of the current dataset snapshot and the
// bundled models with their pages.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fib/onboard/model_registry.h"
#include "serve/site_api.h"

namespace fib::serve {

// The reports of one dataset snapshot, computed once: the server replaces the snapshot (never
// modifies it) when traces are appended, so a report stays right for as long as its snapshot
// is the current one.
struct SiteApi::ReportCache {
  std::mutex mutex;
  std::weak_ptr<const TraceSet> of;
  std::shared_ptr<const Reports> reports;
};

// The ids of a definition's traces (trace_id: a hash of the trace's line, 0.1 ms a trace), kept
// from one snapshot to the next. Traces are immutable records that later snapshots share, so an
// id found for a record at an address holds while that record lives; the cache keeps the
// snapshot it was filled from alive until a newer one replaces it, so that an address it holds
// is never a record freed and reused in between.
struct SiteApi::TraceIdCache {
  struct OfDefinition {
    std::shared_ptr<const TraceSet> set;
    std::unordered_map<const Trace*, std::string> ids;
  };
  std::mutex mutex;
  std::map<std::string, OfDefinition> definitions;

  // The ids of `definition`'s traces in `set`, in its order.
  std::vector<std::string> ids(const std::shared_ptr<const TraceSet>& set,
                               const std::string& definition);
};

struct SiteApi::ModelCache {
  std::mutex mutex;
  std::optional<std::vector<onboard::BundledModel>> bundled;
  // A model's page against the dataset it was deduplicated with (by definition count, since
  // the server only appends traces).
  std::map<std::string, std::pair<std::size_t, Json>> pages;

  // The bundled models, read on first use.
  const std::vector<onboard::BundledModel>& load(const std::filesystem::path& dir);
};

}  // namespace fib::serve
