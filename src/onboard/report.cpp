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
  j["mtp"] = o.mtp;
  j["gemm_shapes"] = std::string(gemm_shapes_name(o.gemm_shapes));
  // null: the model config's quantization_config decides.
  j["quantization"] =
      o.quantization ? Json(std::string(quantization_name(*o.quantization))) : Json(nullptr);
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
  summary["twins"] = r.count(Action::kTwin);
  std::size_t differing = 0, uncompared = 0;
  for (const auto& o : r.outcomes) {
    differing += o.reference_check == ReferenceCheck::kSameOutputs ||
                 o.reference_check == ReferenceCheck::kNotCompared;
    uncompared += o.reference_check == ReferenceCheck::kNotCompared;
  }
  summary["reference_text_differs"] = differing;
  summary["math_not_compared"] = uncompared;
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
    if (o.reference_check != ReferenceCheck::kNone) {
      Json c = Json::object();
      c["result"] = std::string(reference_check_name(o.reference_check));
      if (o.reference_check == ReferenceCheck::kSameOutputs) c["max_abs_diff"] = o.max_abs_diff;
      if (!o.check_detail.empty()) c["detail"] = o.check_detail;
      d["reference_check"] = std::move(c);
    }
    if (!o.twins.empty()) {
      Json twins = Json::array();
      for (const auto& t : o.twins) {
        Json x = Json::object();
        x["name"] = t.name;
        if (!t.path.empty()) x["path"] = t.path;
        x["max_abs_diff"] = t.max_abs_diff;
        x["output"] = t.output;
        twins.push_back(std::move(x));
      }
      d["interface_twins"] = std::move(twins);
    }
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
      "serving: tp {}; ep {}; page sizes {}; stages {}; gemm shapes {}; linear layers {}{}{}{}\n",
      fmt::join(o.tp, ","), fmt::join(o.ep, ","), fmt::join(page_sizes, ","),
      fmt::join(stage_names(o.stages), ","), gemm_shapes_name(o.gemm_shapes),
      quantization_name(o.quantization.value_or(r.plan.config.quantization)),
      o.include_quantized ? "; quantized MoE variants" : "", o.mtp ? "; MTP draft layers" : "",
      o.op_types.empty() ? "" : fmt::format("; op types {}", fmt::join(o.op_types, ",")));
  if (!r.dataset.empty()) {
    out +=
        fmt::format("dataset: {}{}\n", r.dataset, r.dry_run ? " (dry run: nothing written)" : "");
  }
  out += fmt::format("\n{}", render_plan_text(r.plan));

  const auto verb = [&](const char* done, const char* would) { return r.dry_run ? would : done; };
  out += fmt::format(
      "\n{} definitions: {} {}, {} already present, {} shared (tags {}), {} conflict(s), {} "
      "interface twin(s)\n",
      r.outcomes.size(), r.count(Action::kCreate), verb("created", "to create"),
      r.count(Action::kSkip), r.count(Action::kShare), verb("added", "to add"),
      r.count(Action::kConflict), r.count(Action::kTwin));
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
      // Same kernel under another name: the dataset's name is the one that counts.
      if ((a == Action::kShare || a == Action::kSkip) && x.existing != x.def.name) {
        line += fmt::format("  = {}", x.existing);
      }
      if (a == Action::kTwin) {
        std::vector<std::string> twins;
        for (const auto& t : x.twins) {
          twins.push_back(
              fmt::format("{} (max |diff| {:.3g} in {})", t.name, t.max_abs_diff, t.output));
        }
        line += fmt::format("  ~ {}", fmt::join(twins, ", "));
      }
      out += line + "\n";
      for (const auto& n : x.notes) out += fmt::format("      note: {}\n", n);
      if (a != Action::kTwin) {
        for (const auto& t : x.twins) {
          out += fmt::format(
              "      note: '{}' has the same interface and other math (max |diff| {:.3g} in {})\n",
              t.name, t.max_abs_diff, t.output);
        }
      }
    }
  };
  section(Action::kCreate, r.dry_run ? "would create:" : "created:");
  section(Action::kShare, r.dry_run ? "shared with other models (tags would be added):"
                                    : "shared with other models (tags added):");
  section(Action::kConflict,
          "conflicts (same name, different interface; new definition under a versioned name):");
  section(Action::kTwin,
          "interface twins (an existing definition has the same interface and other math, by fib's "
          "native references; kept apart, never merged):");
  section(Action::kSkip, "skipped (the same kernel is already there with these tags):");
  bool any_info = false;
  for (const auto& x : r.outcomes) {
    if (x.reference_check != ReferenceCheck::kSameOutputs &&
        x.reference_check != ReferenceCheck::kNotCompared)
      continue;
    if (!any_info) {
      out +=
          "information: reference texts that differ from the existing definition's (the existing "
          "one is kept):\n";
    }
    any_info = true;
    const std::string which =
        x.existing == x.def.name ? where(x) : fmt::format("{} = {}", where(x), x.existing);
    if (x.reference_check == ReferenceCheck::kSameOutputs) {
      out +=
          fmt::format("  {}: same outputs from fib's native references (max |diff| {:.3g} on {})\n",
                      which, x.max_abs_diff, x.check_detail);
    } else {
      out += fmt::format("  {}: the math could not be compared ({}); merged by the identity rule\n",
                         which, x.check_detail);
    }
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
