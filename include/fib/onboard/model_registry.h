// The bundled models (models/<slug>.json: architecture fields, display name, aliases and a
// default serving setup), found at run time through $FIB_MODELS_DIR or the source tree.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/onboard/model_config.h"
#include "fib/trace/json_reader.h"

namespace fib::onboard {

struct BundledModel {
  std::string slug;                  // "llama-3.1-8b" (the file stem; tags use it)
  std::string display_name;          // "Llama 3.1 8B"
  std::string hf_repo;               // "meta-llama/Llama-3.1-8B"
  std::vector<std::string> aliases;  // other tag spellings of the same model
  std::vector<int> tp;               // default serving setup
  std::vector<int> ep;
  // The linear layers' format it is served with (serving.quantization); unset: its config's.
  std::optional<Quantization> quantization;
  bool mtp = false;        // with its multi-token-prediction draft layers (ServingOptions::mtp)
  std::string provenance;  // where the architecture facts come from
  std::filesystem::path path;
  Json config;  // the architecture fields, in HF spelling
};

// The folder holding the bundled models: $FIB_MODELS_DIR if set, else the first existing of the
// source tree's models/ and <executable>/../share/fib/models. Throws fib::Error naming every
// place it looked when none exists.
std::filesystem::path models_dir();

// Reads every models/*.json (sorted by slug). A malformed file is reported and skipped.
std::vector<BundledModel> load_bundled_models(const std::filesystem::path& dir, Diagnostics& diag);
std::optional<BundledModel> read_bundled_model(const std::filesystem::path& file,
                                               Diagnostics& diag);

// By slug or alias, case-insensitively.
const BundledModel* find_model(const std::vector<BundledModel>& models, std::string_view name);
// Up to `n` slugs closest to `name` (edit distance, then shared prefix), best first.
std::vector<std::string> closest_models(const std::vector<BundledModel>& models,
                                        std::string_view name, std::size_t n = 3);

}  // namespace fib::onboard
