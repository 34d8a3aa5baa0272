// Helpers shared by the onboard tests: bundled models, normalization from JSON text, requests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fib/onboard/model_config.h"
#include "fib/onboard/model_registry.h"
#include "fib/onboard/onboard.h"
#include "support/test_paths.h"

namespace fib::onboard::testing {

inline const std::vector<BundledModel>& bundled() {
  static const std::vector<BundledModel> models = [] {
    Diagnostics diag;
    auto m = load_bundled_models(::fib::testing::source_dir() / "models", diag);
    if (diag.has_errors()) ADD_FAILURE() << diag.to_string();
    return m;
  }();
  return models;
}

inline const BundledModel& model(std::string_view slug) {
  const BundledModel* m = find_model(bundled(), slug);
  if (!m) throw std::runtime_error("no bundled model " + std::string(slug));
  return *m;
}

inline ModelConfig config_of(std::string_view slug) {
  Diagnostics diag;
  const ReadContext ctx{std::string(slug), &diag};
  auto cfg = normalize_config(model(slug).config, ctx);
  if (!cfg) throw std::runtime_error(diag.to_string());
  return *cfg;
}

// Normalizes JSON text; returns the config (if any) and the findings as text.
struct Normalized {
  std::optional<ModelConfig> config;
  std::string findings;
};
inline Normalized normalize_text(const std::string& text) {
  Diagnostics diag;
  const ReadContext ctx{"config.json", &diag};
  auto cfg = normalize_config(Json::parse(text), ctx);
  return {diag.has_errors() ? std::nullopt : cfg, diag.to_string()};
}

inline OnboardRequest request(std::string_view slug, std::vector<int> tp = {},
                              std::vector<int> ep = {}) {
  OnboardRequest r;
  r.config = config_of(slug);
  r.slug = std::string(slug);
  r.display_name = model(slug).display_name;
  r.options.tp = tp.empty() ? model(slug).tp : tp;
  r.options.ep = ep.empty() ? model(slug).ep : ep;
  r.options.quantization = model(slug).quantization;
  return r;
}

inline std::vector<std::string> names(const OnboardResult& r) {
  std::vector<std::string> out;
  for (const auto& o : r.outcomes) out.push_back(o.def.name);
  return out;
}

// Every wanted item is in `have`; the failure message lists the missing ones (gmock's
// IsSupersetOf needs the gmock library, which the module test programs do not link).
inline ::testing::AssertionResult contains_all(const std::vector<std::string>& have,
                                               const std::vector<std::string>& wanted) {
  std::vector<std::string> missing;
  for (const auto& w : wanted) {
    if (std::find(have.begin(), have.end(), w) == have.end()) missing.push_back(w);
  }
  if (missing.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "missing " << ::testing::PrintToString(missing) << " in "
                                       << ::testing::PrintToString(have);
}

}  // namespace fib::onboard::testing
