// What SiteApi keeps between requests: the reports of the current dataset snapshot and the
// bundled models with their pages.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
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
  std::shared_ptr<const Json> leaderboard;
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
