// Onboarding: from a normalized model config and a serving setup to the complete, deduplicated
// set of kernel definitions the model runs, merged into a dataset, with a report (text and JSON)
// and the model's module graph.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fib/base/diagnostics.h"
#include "fib/dataset/trace_set.h"
#include "fib/onboard/generators.h"
#include "fib/onboard/model_config.h"
#include "fib/onboard/model_registry.h"
#include "fib/onboard/module_graph.h"
#include "fib/onboard/plan.h"
#include "fib/onboard/serving.h"
#include "fib/trace/definition.h"

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
  kSkip,      // the dataset has the kernel (by identity) with every tag already
  kShare,     // the dataset has the kernel (possibly under another name): tags added
  kConflict,  // the name is taken by a different interface: written under a versioned name
  kTwin,      // the dataset has its interface with different math: written under its own name
};
std::string_view action_name(Action a);

// How the generated reference compares with the matched definition's.
enum class ReferenceCheck : std::uint8_t {
  kNone,         // no match (created, conflict, twin)
  kSameText,     // identical reference text
  kSameOutputs,  // different text, the native references give the same outputs
  kNotCompared,  // different text, the math could not be compared: merged by the identity rule
};
std::string_view reference_check_name(ReferenceCheck c);

// A dataset definition with the generated one's interface but other math.
struct InterfaceTwin {
  std::string name;
  std::string path;  // relative to the dataset root; empty for a definition of this run
  double max_abs_diff = 0;
  std::string output;  // where the outputs differ
};

struct DefinitionOutcome {
  Definition def;              // the generated definition (its final name; tags of every use)
  std::string generated_name;  // before versioning
  Action action = Action::kCreate;
  // The definition matched by identity (skip/share; its name may differ from the generated
  // one) or whose name clashed (conflict).
  std::string existing;
  std::string existing_path;  // relative to the dataset root; empty for one of this run
  std::vector<std::string> tags_added;
  std::vector<std::string> shared_with;  // model: values the existing definition already had
  ReferenceCheck reference_check = ReferenceCheck::kNone;
  std::string check_detail;          // the inputs compared on, or why the math was not compared
  double max_abs_diff = 0;           // kSameOutputs: the largest output difference seen
  std::vector<InterfaceTwin> twins;  // same interface, different math (kTwin; info otherwise)
  std::vector<std::string> notes;    // legacy interface, versioned name, ...
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

// A bundled model onboarded in its default serving setup; nullopt with the config's findings in
// `error` when its architecture fields do not read.
std::optional<OnboardResult> generate_bundled(const BundledModel& model, std::string* error);

// Decides each outcome against a dataset and builds the module graph with the final names.
// `dataset` may be null (empty). The identity rule (dedup.h) finds the dataset definitions with
// the generated interface (or a legacy spelling of it), whatever their names; a same-named one is
// tried first. Identical reference text: the same kernel. Different text: compare_math decides;
// same outputs, or no native reference to compare with, the same kernel (noted); different
// outputs, an interface twin. No match: created, under a versioned name when the name is taken
// by a different interface (a conflict) or by a twin. Definitions created earlier in the same
// run count as dataset definitions.
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
