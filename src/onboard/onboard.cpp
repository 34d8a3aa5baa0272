// The onboarding pipeline: plan -> expand per serving point -> generate -> merge within the run
// -> deduplicate against the dataset -> write.
#include "fib/onboard/onboard.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "fib/dataset/files.h"
#include "fib/onboard/dedup.h"
#include "fib/onboard/naming.h"
#include "fib/trace/json_file.h"

namespace fib::onboard {

namespace fs = std::filesystem;

std::string_view action_name(Action a) {
  switch (a) {
    case Action::kCreate:
      return "created";
    case Action::kSkip:
      return "skipped";
    case Action::kShare:
      return "shared";
    case Action::kConflict:
      return "conflict";
  }
  return "?";
}

std::size_t OnboardResult::count(Action a) const {
  return static_cast<std::size_t>(std::count_if(
      outcomes.begin(), outcomes.end(), [a](const DefinitionOutcome& o) { return o.action == a; }));
}

const DefinitionOutcome* OnboardResult::find(std::string_view name) const {
  for (const auto& o : outcomes) {
    if (o.def.name == name || o.generated_name == name) return &o;
  }
  return nullptr;
}

namespace {

void add_tags(std::vector<std::string>& tags, const std::vector<std::string>& more) {
  for (const auto& t : more) {
    if (std::find(tags.begin(), tags.end(), t) == tags.end()) tags.push_back(t);
  }
}

bool same_unsupported(const UnsupportedPart& a, const UnsupportedPart& b) {
  return a.layer_type == b.layer_type && a.module == b.module && a.component == b.component &&
         a.reason == b.reason;
}

// The name a module should list for a kernel use: the dataset's definition when the kernel
// already exists there, else the (possibly versioned) new one.
std::string final_name(const DefinitionOutcome& o) {
  return (o.action == Action::kSkip || o.action == Action::kShare) ? o.existing : o.def.name;
}

void build_graph(OnboardResult& r, const GenContext& ctx) {
  r.graph = ModuleGraph{};
  r.graph.id = r.slug;
  r.graph.name = r.display_name;
  const auto params = count_parameters(r.plan.config);
  r.graph.description = fmt::format(
      "{} ({}): {} layers, {} parameters{}", r.display_name, family_name(r.plan.config.family),
      r.plan.config.num_layers, format_count(params.total),
      params.active != params.total ? fmt::format(", {} active", format_count(params.active)) : "");
  std::unordered_map<std::string, std::vector<std::size_t>> by_generated;
  for (std::size_t i = 0; i < r.outcomes.size(); ++i)
    by_generated[r.outcomes[i].generated_name].push_back(i);
  for (const auto& e : r.expansions) {
    r.graph.add(e, [&](const KernelUse& use) -> std::string {
      const auto it = by_generated.find(definition_name(use.spec));
      if (it == by_generated.end()) return {};
      if (it->second.size() == 1) return final_name(r.outcomes[it->second.front()]);
      // Several interfaces under one generated name: tell them apart by the full interface.
      const Definition d = generate_definition(use.spec, ctx);
      for (auto i : it->second) {
        if (same_kernel(d, r.outcomes[i].def)) return final_name(r.outcomes[i]);
      }
      return {};
    });
  }
}

}  // namespace

OnboardResult generate(const OnboardRequest& request) {
  OnboardResult r;
  r.slug = request.slug;
  r.display_name = request.display_name;
  r.source = request.source;
  r.options = request.options;
  r.plan = build_plan(request.config);
  const GenContext ctx{request.slug, request.display_name};

  std::unordered_map<std::string, std::size_t> by_interface;  // name|fingerprint -> outcome
  std::set<std::string> seen_errors;
  for (const auto& point : request.options.points()) {
    Expansion e = expand_plan(r.plan, point, request.options);
    for (const auto& d : e.diagnostics) {
      if (seen_errors.insert(d.to_string()).second) r.diagnostics.add(d);
    }
    for (const auto& u : e.unsupported) {
      if (std::none_of(r.unsupported.begin(), r.unsupported.end(),
                       [&](const UnsupportedPart& x) { return same_unsupported(x, u); })) {
        r.unsupported.push_back(u);
      }
    }
    for (const auto& m : e.modules) {
      for (const auto& use : m.kernels) {
        Definition d = generate_definition(use.spec, ctx);
        const std::string key = fmt::format("{}|{}", d.name, interface_fingerprint(d));
        if (auto it = by_interface.find(key); it != by_interface.end()) {
          add_tags(r.outcomes[it->second].def.tags, d.tags);
          continue;
        }
        by_interface.emplace(key, r.outcomes.size());
        DefinitionOutcome o;
        o.generated_name = d.name;
        o.def = std::move(d);
        r.outcomes.push_back(std::move(o));
      }
    }
    r.expansions.push_back(std::move(e));
  }
  std::stable_sort(r.outcomes.begin(), r.outcomes.end(),
                   [](const DefinitionOutcome& a, const DefinitionOutcome& b) {
                     if (a.def.op_type != b.def.op_type) return a.def.op_type < b.def.op_type;
                     return a.def.name < b.def.name;
                   });
  build_graph(r, ctx);
  return r;
}

void deduplicate(OnboardResult& r, const TraceSet* dataset) {
  std::unordered_map<std::string, std::vector<const Definition*>> by_fingerprint;
  if (dataset) {
    for (const auto& rec : dataset->definitions())
      by_fingerprint[interface_fingerprint(rec.value)].push_back(&rec.value);
  }
  std::set<std::string> new_names;
  auto taken = [&](std::string_view n) {
    return (dataset && dataset->definition(n)) || new_names.count(std::string(n)) > 0;
  };
  auto path_of = [&](const Definition& d) {
    const auto* rec = dataset->definition_record(d.name);
    return rec ? dataset->files()[rec->source.file].path : std::string();
  };
  auto match = [&](DefinitionOutcome& o, const Definition& existing) {
    o.existing = existing.name;
    o.existing_path = path_of(existing);
    o.tags_added = missing_sharing_tags(existing, o.def.tags);
    for (const auto& m : existing.tag_values("model:")) {
      if (m != r.slug) o.shared_with.push_back(m);
    }
    o.action = o.tags_added.empty() ? Action::kSkip : Action::kShare;
    if (existing.reference != o.def.reference) {
      o.notes.emplace_back(kReferenceDiffers);
    }
  };

  for (auto& o : r.outcomes) {
    o.action = Action::kCreate;
    o.existing.clear();
    o.tags_added.clear();
    o.shared_with.clear();
    o.notes.clear();
    o.def.name = o.generated_name;
    const Definition* existing = dataset ? dataset->definition(o.generated_name) : nullptr;
    const Definition* same_interface = nullptr;
    if (auto it = by_fingerprint.find(interface_fingerprint(o.def)); it != by_fingerprint.end()) {
      same_interface = it->second.front();
      for (const auto* d : it->second) {
        if (d->name == o.generated_name) same_interface = d;
      }
    }
    if (existing && same_kernel(o.def, *existing)) {
      match(o, *existing);
      continue;
    }
    if (existing) {
      bool legacy_match = false;
      for (const auto& legacy : legacy_interfaces(o.def)) {
        if (same_kernel(legacy.def, *existing)) {
          match(o, *existing);
          o.notes.push_back("the existing definition uses an older interface spelling: " +
                            legacy.note);
          legacy_match = true;
          break;
        }
      }
      if (legacy_match) continue;
    }
    // Names encode what interfaces cannot (NeoX vs GPT-J RoPE, a folded Gemma norm): a definition
    // with the same interface under another name is reported, not merged.
    if (same_interface && same_interface->name != o.generated_name) {
      o.notes.push_back(
          fmt::format("the dataset has a definition with the same interface under another name, "
                      "'{}' (kept apart: names carry the math variant)",
                      same_interface->name));
    }
    // A taken name - by the dataset or by another interface of this run - gets a version suffix.
    if (existing || new_names.count(o.generated_name)) {
      std::string diff = "another interface generated in this run has the same name";
      if (existing) same_kernel(o.def, *existing, &diff);
      o.action = Action::kConflict;
      if (existing) {
        o.existing = existing->name;
        o.existing_path = path_of(*existing);
      }
      o.def.name = versioned_name(o.generated_name, taken);
      o.notes.push_back(
          fmt::format("name '{}' is taken by a different interface ({}); written as '{}'",
                      o.generated_name, diff, o.def.name));
      new_names.insert(o.def.name);
      continue;
    }
    new_names.insert(o.def.name);
  }
  if (dataset) r.dataset = dataset->root().string();
  build_graph(r, GenContext{r.slug, r.display_name});
}

void apply(const OnboardResult& r, const fs::path& root, const TraceSet* dataset) {
  // New kernels first, then tag additions grouped per existing file.
  std::map<std::string, std::vector<std::string>> tags_by_path;
  for (const auto& o : r.outcomes) {
    if (o.action == Action::kCreate || o.action == Action::kConflict) {
      write_definition(root, o.def);
    } else if (o.action == Action::kShare) {
      auto& tags = tags_by_path[o.existing_path];
      add_tags(tags, o.tags_added);
    }
  }
  if (!dataset) return;
  for (const auto& [rel, tags] : tags_by_path) {
    const fs::path file = root / rel;
    Diagnostics diag;
    auto j = read_json_file(file.string(), diag);
    if (!j || !j->is_object()) throw Error(std::move(diag));
    // Edit the stored JSON, not a re-serialized Definition, so every other byte of meaning
    // (field order, unknown extras a newer schema may add) survives.
    Json out = Json::object();
    bool placed = false;
    for (auto it = j->begin(); it != j->end(); ++it) {
      if (it.key() == "tags") {
        Json t = it.value().is_array() ? it.value() : Json::array();
        for (const auto& tag : tags) t.push_back(tag);
        out["tags"] = std::move(t);
        placed = true;
      } else {
        out[it.key()] = it.value();
      }
      if (it.key() == "op_type" && !placed && !j->contains("tags")) {
        out["tags"] = tags;
        placed = true;
      }
    }
    if (!placed) out["tags"] = tags;
    write_file_atomic(file, dump_json_pretty(out));
  }
}

OnboardResult onboard(const OnboardRequest& request, const fs::path& dataset, bool dry_run) {
  OnboardResult r = generate(request);
  r.dry_run = dry_run;
  std::optional<TraceSet> set;
  std::error_code ec;
  if (fs::exists(dataset, ec) && !fs::is_directory(dataset, ec)) {
    throw Error(dataset.string(), "the dataset path exists but is not a folder");
  }
  const bool has_data = fs::is_directory(dataset / "definitions", ec) ||
                        fs::is_directory(dataset / "workloads", ec) ||
                        fs::is_directory(dataset / "solutions", ec) ||
                        fs::is_directory(dataset / "traces", ec);
  if (has_data) {
    set = TraceSet::load(dataset);
    const auto broken = set->load_diagnostics().count(Severity::kError);
    if (broken > 0) {
      r.diagnostics.warning(
          dataset.string(), "",
          fmt::format("{} finding(s) while loading the dataset; unreadable definitions are not "
                      "deduplicated against (run fib validate)",
                      broken));
    }
  } else {
    r.diagnostics.info(dataset.string(), "",
                       dry_run ? "no dataset here yet; everything would be created"
                               : "no dataset here yet; it is created with the new definitions");
  }
  deduplicate(r, set ? &*set : nullptr);
  r.dataset = dataset.string();
  if (!dry_run) apply(r, dataset, set ? &*set : nullptr);
  return r;
}

}  // namespace fib::onboard
