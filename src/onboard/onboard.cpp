// The onboarding pipeline: plan -> expand per serving point -> generate -> merge within the run
// -> deduplicate against the dataset -> write.
#include "fib/onboard/onboard.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>

#include "fib/base/json.h"
#include "fib/dataset/files.h"
#include "fib/onboard/dedup.h"
#include "fib/onboard/naming.h"
#include "fib/trace/json_reader.h"

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
    case Action::kTwin:
      return "twin";
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

std::optional<OnboardResult> generate_bundled(const BundledModel& model, std::string* error) {
  Diagnostics diag;
  const ReadContext ctx{model.path.string() + ":config", &diag};
  auto cfg = normalize_config(model.config, ctx);
  if (!cfg || diag.has_errors()) {
    *error = diag.to_string();
    return std::nullopt;
  }
  OnboardRequest req;
  req.config = std::move(*cfg);
  req.slug = model.slug;
  req.display_name = model.display_name;
  req.source = model.path.string();
  req.options.tp = model.tp;
  req.options.ep = model.ep;
  req.options.quantization = model.quantization;
  req.options.mtp = model.mtp;
  return generate(req);
}

namespace {

// A definition deduplication can match: one of the dataset, or one created earlier in this run.
struct Known {
  const Definition* def = nullptr;
  std::string path;         // relative to the dataset root; empty for this run's
  std::size_t outcome = 0;  // this run's: the index of its outcome
  bool this_run = false;
};

// A Known with the generated interface (or a legacy spelling of it: `compared` is then the
// generated definition in that spelling).
struct Candidate {
  const Known* known = nullptr;
  const Definition* compared = nullptr;
  std::string legacy_note;
};

}  // namespace

std::string_view reference_check_name(ReferenceCheck c) {
  switch (c) {
    case ReferenceCheck::kNone:
      return "none";
    case ReferenceCheck::kSameText:
      return "same_text";
    case ReferenceCheck::kSameOutputs:
      return "same_outputs";
    case ReferenceCheck::kNotCompared:
      return "not_compared";
  }
  return "?";
}

void deduplicate(OnboardResult& r, const TraceSet* dataset) {
  // The identity key is the interface fingerprint; names are not part of it. Each list keeps the
  // dataset's definitions, then this run's in the order they are decided. (std::deque: Known
  // pointers into it stay valid while it grows.)
  std::unordered_map<std::string, std::deque<Known>> by_fingerprint;
  auto path_of = [&](const Definition& d) {
    const auto* rec = dataset->definition_record(d.name);
    return rec ? dataset->files()[rec->source.file].path : std::string();
  };
  if (dataset) {
    for (const auto& rec : dataset->definitions()) {
      by_fingerprint[interface_fingerprint(rec.value)].push_back(
          Known{&rec.value, path_of(rec.value), 0, false});
    }
  }
  std::set<std::string> new_names;
  auto taken = [&](std::string_view n) {
    return (dataset && dataset->definition(n)) || new_names.count(std::string(n)) > 0;
  };
  for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
    DefinitionOutcome& o = r.outcomes[i];
    o.action = Action::kCreate;
    o.existing.clear();
    o.existing_path.clear();
    o.tags_added.clear();
    o.shared_with.clear();
    o.reference_check = ReferenceCheck::kNone;
    o.check_detail.clear();
    o.max_abs_diff = 0;
    o.twins.clear();
    o.notes.clear();
    o.def.name = o.generated_name;

    // Every known definition with the generated interface or a legacy spelling of it; the one
    // of the generated name first, then by name.
    const std::vector<LegacyInterface> legacies = legacy_interfaces(o.def);
    std::vector<Candidate> candidates;
    auto collect = [&](const Definition& spelling, const std::string& note) {
      auto it = by_fingerprint.find(interface_fingerprint(spelling));
      if (it == by_fingerprint.end()) return;
      for (const Known& k : it->second) candidates.push_back(Candidate{&k, &spelling, note});
    };
    collect(o.def, "");
    for (const auto& l : legacies) collect(l.def, l.note);
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](const Candidate& a, const Candidate& b) {
                       const bool an = a.known->def->name == o.generated_name;
                       const bool bn = b.known->def->name == o.generated_name;
                       if (an != bn) return an;
                       return a.known->def->name < b.known->def->name;
                     });

    // The same kernel: identical reference text, else the same native outputs, else (no native
    // reference to compare with) the identity rule alone.
    const Candidate* match = nullptr;
    MathComparison how;
    for (const auto& c : candidates) {
      if (c.known->def->reference == c.compared->reference) {
        match = &c;
        o.reference_check = ReferenceCheck::kSameText;
        break;
      }
    }
    if (!match) {
      const Candidate* uncompared = nullptr;
      MathComparison uncompared_how;
      for (const auto& c : candidates) {
        // Two native reference runs (compare_math keeps each pair's result).
        const MathComparison m = compare_math(*c.known->def, *c.compared);
        if (m.verdict == MathVerdict::kSame) {
          match = &c;
          how = m;
          o.reference_check = ReferenceCheck::kSameOutputs;
          break;
        }
        if (m.verdict == MathVerdict::kNotCompared) {
          if (!uncompared) {
            uncompared = &c;
            uncompared_how = m;
          }
          continue;
        }
        o.twins.push_back(
            InterfaceTwin{c.known->def->name, c.known->path, m.max_abs_diff, m.output});
      }
      if (!match && uncompared) {
        match = uncompared;
        how = uncompared_how;
        o.reference_check = ReferenceCheck::kNotCompared;
      }
    }

    if (match) {
      const Known& k = *match->known;
      o.existing = k.def->name;
      o.existing_path = k.path;
      o.check_detail = how.detail;
      o.max_abs_diff = how.max_abs_diff;
      if (!match->legacy_note.empty()) {
        o.notes.push_back("the existing definition uses an older interface spelling: " +
                          match->legacy_note);
      }
      if (k.this_run) {
        // Two generated names of one kernel: the first one written carries both uses' tags.
        add_tags(r.outcomes[k.outcome].def.tags, missing_sharing_tags(*k.def, o.def.tags));
        o.action = Action::kSkip;
        o.notes.push_back(
            fmt::format("the same kernel as '{}', created in this run (its tags are merged there)",
                        k.def->name));
        continue;
      }
      o.tags_added = missing_sharing_tags(*k.def, o.def.tags);
      for (const auto& m : k.def->tag_values("model:")) {
        if (m != r.slug) o.shared_with.push_back(m);
      }
      o.action = o.tags_added.empty() ? Action::kSkip : Action::kShare;
      continue;
    }

    // A new definition. A taken name - by the dataset or by this run - gets a version suffix.
    const Definition* same_name = dataset ? dataset->definition(o.generated_name) : nullptr;
    const bool name_taken = same_name || new_names.count(o.generated_name) > 0;
    if (!o.twins.empty()) o.action = Action::kTwin;
    if (name_taken) {
      std::string diff = "another definition generated in this run has the same name";
      if (same_name && !same_kernel(o.def, *same_name, &diff)) {
        diff = "a different interface: " + diff;
      } else if (same_name) {
        diff = "its interface twin (the same interface, different math)";
      }
      if (o.action != Action::kTwin) o.action = Action::kConflict;
      if (same_name) {
        o.existing = same_name->name;
        o.existing_path = path_of(*same_name);
      }
      o.def.name = versioned_name(o.generated_name, taken);
      o.notes.push_back(fmt::format("name '{}' is taken by {}; written as '{}'", o.generated_name,
                                    diff, o.def.name));
    }
    new_names.insert(o.def.name);
    by_fingerprint[interface_fingerprint(o.def)].push_back(Known{&o.def, "", i, true});
  }
  if (dataset) r.dataset = dataset->root().string();
  build_graph(r, GenContext{r.slug, r.display_name});
}

void apply(const OnboardResult& r, const fs::path& root, const TraceSet* dataset) {
  // New kernels first, then tag additions grouped per existing file.
  std::map<std::string, std::vector<std::string>> tags_by_path;
  for (const auto& o : r.outcomes) {
    if (o.action == Action::kCreate || o.action == Action::kConflict || o.action == Action::kTwin) {
      write_definition(root, o.def);
    } else if (o.action == Action::kShare && !o.existing_path.empty()) {
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
