// The onboarding report, as JSON (for tools and the web UI) and as text (for people).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "fib/onboard/onboard.h"

namespace fib::onboard {

namespace {

std::vector<std::string> stage_names(const std::vector<Stage>& stages) {
  std::vector<std::string> out;
  for (auto s : stages) out.emplace_back(stage_name(s));
  return out;
}

Json serving_json(const ServingOptions& o) {
  Json j = Json::object();
  j["tp"] = o.tp;
  j["ep"] = o.ep;
  j["page_sizes"] = o.page_sizes;
  j["stages"] = stage_names(o.stages);
  j["include_quantized"] = o.include_quantized;
  j["gemm_shapes"] = std::string(gemm_shapes_name(o.gemm_shapes));
  j["op_types"] = o.op_types;
  return j;
}

std::string where(const DefinitionOutcome& o) {
  return fmt::format("{}/{}", o.def.op_type, o.def.name);
}

}  // namespace

Json report_to_json(const OnboardResult& r) {
  Json j = Json::object();
  Json model = Json::object();
  model["slug"] = r.slug;
  model["name"] = r.display_name;
  model["family"] = std::string(family_name(r.plan.config.family));
  model["source"] = r.source;
  j["model"] = std::move(model);
  j["serving"] = serving_json(r.options);
  j["dataset"] = r.dataset;
  j["dry_run"] = r.dry_run;
  Json summary = Json::object();
  summary["definitions"] = r.outcomes.size();
  summary["created"] = r.count(Action::kCreate);
  summary["skipped"] = r.count(Action::kSkip);
  summary["shared"] = r.count(Action::kShare);
  summary["conflicts"] = r.count(Action::kConflict);
  summary["unsupported"] = r.unsupported.size();
  summary["errors"] = r.diagnostics.count(Severity::kError);
  j["summary"] = std::move(summary);
  Json defs = Json::array();
  for (const auto& o : r.outcomes) {
    Json d = Json::object();
    d["name"] = o.def.name;
    d["op_type"] = o.def.op_type;
    d["action"] = std::string(action_name(o.action));
    if (o.generated_name != o.def.name) d["generated_name"] = o.generated_name;
    if (!o.existing.empty()) d["existing"] = o.existing;
    if (!o.existing_path.empty()) d["existing_path"] = o.existing_path;
    if (!o.tags_added.empty()) d["tags_added"] = o.tags_added;
    if (!o.shared_with.empty()) d["shared_with"] = o.shared_with;
    d["tags"] = o.def.tags;
    if (!o.notes.empty()) d["notes"] = o.notes;
    defs.push_back(std::move(d));
  }
  j["definitions"] = std::move(defs);
  Json unsupported = Json::array();
  for (const auto& u : r.unsupported) {
    Json x = Json::object();
    x["severity"] = std::string(severity_name(u.severity));
    if (!u.layer_type.empty()) x["layer_type"] = u.layer_type;
    if (!u.module.empty()) x["module"] = u.module;
    x["component"] = u.component;
    x["reason"] = u.reason;
    unsupported.push_back(std::move(x));
  }
  j["unsupported"] = std::move(unsupported);
  Json diags = Json::array();
  for (const auto& d : r.diagnostics) {
    Json x = Json::object();
    x["severity"] = std::string(severity_name(d.severity));
    if (!d.file.empty()) x["file"] = d.file;
    x["message"] = d.message;
    if (!d.hint.empty()) x["hint"] = d.hint;
    diags.push_back(std::move(x));
  }
  j["diagnostics"] = std::move(diags);
  j["plan"] = plan_to_json(r.plan);
  j["module_graph"] = module_graph_to_json(r.graph);
  return j;
}

std::string render_report_text(const OnboardResult& r) {
  std::string out;
  const auto& o = r.options;
  out += fmt::format("fib onboard: {} ({}, family {})", r.display_name, r.slug,
                     family_name(r.plan.config.family));
  if (!r.source.empty()) out += fmt::format(" from {}", r.source);
  out += "\n";
  std::vector<std::string> page_sizes;
  for (auto p : o.page_sizes) page_sizes.push_back(std::to_string(p));
  out += fmt::format(
      "serving: tp {}; ep {}; page sizes {}; stages {}; gemm shapes {}{}{}\n", fmt::join(o.tp, ","),
      fmt::join(o.ep, ","), fmt::join(page_sizes, ","), fmt::join(stage_names(o.stages), ","),
      gemm_shapes_name(o.gemm_shapes), o.include_quantized ? "; quantized MoE variants" : "",
      o.op_types.empty() ? "" : fmt::format("; op types {}", fmt::join(o.op_types, ",")));
  if (!r.dataset.empty()) {
    out +=
        fmt::format("dataset: {}{}\n", r.dataset, r.dry_run ? " (dry run: nothing written)" : "");
  }
  out += fmt::format("\n{}", render_plan_text(r.plan));

  const auto verb = [&](const char* done, const char* would) { return r.dry_run ? would : done; };
  out += fmt::format(
      "\n{} definitions: {} {}, {} already present, {} shared (tags {}), {} conflict(s)\n",
      r.outcomes.size(), r.count(Action::kCreate), verb("created", "to create"),
      r.count(Action::kSkip), r.count(Action::kShare), verb("added", "to add"),
      r.count(Action::kConflict));
  auto section = [&](Action a, const std::string& title) {
    bool any = false;
    for (const auto& x : r.outcomes) {
      if (x.action != a) continue;
      if (!any) out += title + "\n";
      any = true;
      std::string line = fmt::format("  {}", where(x));
      if (a == Action::kShare) {
        line += fmt::format("  +{}", fmt::join(x.tags_added, " +"));
        if (!x.shared_with.empty())
          line += fmt::format("  (also {})", fmt::join(x.shared_with, ", "));
      }
      if ((a == Action::kShare || a == Action::kSkip) && x.existing != x.def.name) {
        line += fmt::format("  = {}", x.existing);
      }
      out += line + "\n";
      for (const auto& n : x.notes) {
        if (n != kReferenceDiffers) out += fmt::format("      note: {}\n", n);
      }
    }
  };
  section(Action::kCreate, r.dry_run ? "would create:" : "created:");
  section(Action::kShare, r.dry_run ? "shared with other models (tags would be added):"
                                    : "shared with other models (tags added):");
  section(Action::kConflict,
          "conflicts (same name, different interface; new definition under a versioned name):");
  section(Action::kSkip, "skipped (already present with these tags):");
  std::size_t differing = 0;
  for (const auto& x : r.outcomes) {
    differing += std::count(x.notes.begin(), x.notes.end(), kReferenceDiffers) > 0 ? 1 : 0;
  }
  if (differing > 0) {
    out += fmt::format(
        "information: {} existing definition(s) have a reference text other than the generated one "
        "(kept as they are; the JSON report lists them)\n",
        differing);
  }
  if (!r.unsupported.empty()) {
    // One line per missing part; the modules (one per layer type) that need it are listed together.
    out += "unsupported parts (no generator; not in the definitions):\n";
    std::vector<bool> done(r.unsupported.size(), false);
    for (std::size_t i = 0; i < r.unsupported.size(); ++i) {
      if (done[i]) continue;
      const auto& u = r.unsupported[i];
      std::vector<std::string> modules;
      for (std::size_t j = i; j < r.unsupported.size(); ++j) {
        const auto& v = r.unsupported[j];
        if (done[j] || v.component != u.component || v.reason != u.reason ||
            v.severity != u.severity)
          continue;
        done[j] = true;
        if (!v.module.empty()) modules.push_back(v.module);
      }
      out += fmt::format(
          "  [{}] {}{}: {}\n", severity_name(u.severity),
          modules.empty() ? std::string() : fmt::format("{}: ", fmt::join(modules, ", ")),
          u.component, u.reason);
    }
  }
  if (!r.plan.config.notes.empty()) {
    out += "config notes:\n";
    for (const auto& n : r.plan.config.notes) out += "  " + n + "\n";
  }
  if (!r.diagnostics.empty()) {
    out += "diagnostics:\n";
    for (const auto& d : r.diagnostics) out += "  " + d.to_string() + "\n";
  }
  return out;
}

}  // namespace fib::onboard
