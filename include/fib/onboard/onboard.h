// Onboarding: from a normalized model config and a serving setup to the complete, deduplicated
// set of kernel definitions the model runs, merged into a dataset, with a report (text and JSON)
// and the model's module graph.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fib/dataset/trace_set.h"
#include "fib/onboard/generators.h"
#include "fib/onboard/model_config.h"
#include "fib/onboard/module_graph.h"
#include "fib/onboard/plan.h"
#include "fib/onboard/serving.h"
#include "fib/trace/definition.h"
#include "fib/trace/diagnostics.h"

namespace fib::onboard {

struct OnboardRequest {
  ModelConfig config;
  std::string slug;          // tags: model:<slug>
  std::string display_name;  // descriptions
  std::string source;        // where the config came from (report only)
  ServingOptions options;
};

enum class Action : std::uint8_t {
  kCreate,    // new kernel: written
  kSkip,      // the dataset has it with every tag already
  kShare,     // the dataset has it (possibly for other models): tags added
  kConflict,  // the name is taken by a different interface: written under a versioned name
};
std::string_view action_name(Action a);

// The note on a skipped or shared definition whose stored reference text differs from the
// generated one (information: the identity rule ignores reference texts).
inline constexpr std::string_view kReferenceDiffers =
    "the existing reference text differs from the generated one (the existing one is kept)";

struct DefinitionOutcome {
  Definition def;              // the generated definition (its final name; tags of every use)
  std::string generated_name;  // before versioning
  Action action = Action::kCreate;
  std::string existing;  // the dataset definition matched (skip/share) or clashed with (conflict)
  std::string existing_path;  // relative to the dataset root
  std::vector<std::string> tags_added;
  std::vector<std::string> shared_with;  // model: values the existing definition already had
  std::vector<std::string> notes;        // reference differs, legacy interface, renamed, ...
};

struct OnboardResult {
  std::string slug;
  std::string display_name;
  std::string source;
  ServingOptions options;
  ModelPlan plan;
  std::vector<Expansion> expansions;        // one per serving point
  std::vector<DefinitionOutcome> outcomes;  // sorted by op_type, then name
  std::vector<UnsupportedPart> unsupported;
  Diagnostics diagnostics;
  ModuleGraph graph;
  std::string dataset;  // root, when deduplicated against one
  bool dry_run = false;

  bool has_errors() const { return diagnostics.has_errors(); }
  std::size_t count(Action a) const;
  const DefinitionOutcome* find(std::string_view name) const;
};

// Plans, expands every serving point, generates and merges definitions (same name and interface:
// one definition carrying every tag). Every outcome is kCreate until deduplicate() runs.
OnboardResult generate(const OnboardRequest& request);

// Decides each outcome against a dataset (identity rule; legacy interfaces; versioned names for
// conflicts) and builds the module graph with the final names. `dataset` may be null (empty).
void deduplicate(OnboardResult& result, const TraceSet* dataset);

// Writes new definitions and adds tags to shared ones (each file replaced atomically).
void apply(const OnboardResult& result, const std::filesystem::path& root, const TraceSet* dataset);

// The whole pipeline against a dataset folder (missing or empty: created on write). With
// dry_run nothing is written.
OnboardResult onboard(const OnboardRequest& request, const std::filesystem::path& dataset,
                      bool dry_run);

Json report_to_json(const OnboardResult& r);
std::string render_report_text(const OnboardResult& r);

}  // namespace fib::onboard
