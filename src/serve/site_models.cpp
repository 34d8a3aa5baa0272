// The models of the web interface: the bundled ones (models/), each expanded at its default
// serving setup by `fib onboard`'s pipeline and deduplicated against the served dataset, and
// the models the dataset's definitions are tagged with that fib does not bundle.
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "fib/base/diagnostics.h"
#include "fib/onboard/inventory.h"
#include "fib/onboard/model_registry.h"
#include "fib/onboard/onboard.h"
#include "serve/site_api.h"
#include "serve/site_caches.h"

namespace fib::serve {

namespace {

// The dataset definitions tagged with a model (its slug or any alias).
std::set<std::string> tagged(const TraceSet& set, const onboard::BundledModel& m) {
  std::set<std::string> names;
  auto add = [&](const std::string& slug) {
    for (const auto* d : set.definitions_with_tag("model:" + slug)) names.insert(d->name);
  };
  add(m.slug);
  for (const auto& a : m.aliases) add(a);
  return names;
}

Json bundled_json(const onboard::BundledModel& m, const TraceSet& set) {
  Json j;
  j["id"] = m.slug;
  j["name"] = m.display_name;
  j["hf_repo"] = m.hf_repo;
  j["serving"] = Json{{"tp", m.tp}, {"ep", m.ep}};
  j["in_dataset"] = tagged(set, m).size();
  std::string error;
  const auto r = onboard::generate_bundled(m, &error);
  if (!r) {
    j["error"] = error;
    return j;
  }
  const auto& cfg = r->plan.config;
  const auto params = onboard::count_parameters(cfg);
  j["family"] = std::string(onboard::family_name(cfg.family));
  j["layers"] = cfg.num_layers;
  j["parameters"] = params.total;
  j["active_parameters"] = params.active;
  j["parameters_text"] = onboard::format_count(params.total);
  j["definitions"] = r->outcomes.size();
  j["modules"] = r->graph.nodes.size();
  return j;
}

// Model slugs of the dataset's model: tags that no bundled model answers to, with their
// definitions.
std::map<std::string, std::vector<std::string>> onboarded_only(
    const TraceSet& set, const std::vector<onboard::BundledModel>& bundled) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& rec : set.definitions()) {
    for (const auto& slug : rec.value.tag_values("model:")) {
      if (!onboard::find_model(bundled, slug)) out[slug].push_back(rec.value.name);
    }
  }
  return out;
}

Json definition_entry(const TraceSet& set, const std::string& name, const std::string& op_type) {
  const bool held = set.definition(name) != nullptr;
  return Json{{"name", name},
              {"op_type", op_type},
              {"in_dataset", held},
              {"traces", held ? set.traces(name).size() : 0}};
}

}  // namespace

const std::vector<onboard::BundledModel>& SiteApi::ModelCache::load(
    const std::filesystem::path& dir) {
  if (!bundled) {
    Diagnostics diag;
    bundled = onboard::load_bundled_models(dir.empty() ? onboard::models_dir() : dir, diag);
  }
  return *bundled;
}

Json SiteApi::models() const {
  const auto set = source_.dataset();
  if (!set) throw Error("dataset", "the server has no dataset loaded");
  std::lock_guard lock(models_->mutex);
  const auto& bundled = models_->load(source_.models_dir);
  Json list = Json::array();
  for (const auto& m : bundled) list.push_back(bundled_json(m, *set));
  Json others = Json::array();
  for (const auto& [slug, defs] : onboarded_only(*set, bundled))
    others.push_back(Json{{"id", slug}, {"name", slug}, {"in_dataset", defs.size()}});
  return Json{{"bundled", std::move(list)}, {"onboarded", std::move(others)}};
}

namespace {

Json bundled_page(const onboard::BundledModel& m, const TraceSet& set) {
  std::string error;
  auto r = onboard::generate_bundled(m, &error);
  if (!r) throw Error(m.path.string(), error);
  onboard::deduplicate(*r, &set);
  Json j = bundled_json(m, set);
  j["bundled"] = true;
  j["graph"] = onboard::module_graph_to_json(r->graph);
  std::map<std::string, std::string> op_types;
  for (const auto& o : r->outcomes) {
    const bool shared = o.action == onboard::Action::kSkip || o.action == onboard::Action::kShare;
    op_types[shared ? o.existing : o.def.name] = o.def.op_type;
  }
  Json defs = Json::array();
  for (const auto& [name, op] : op_types) defs.push_back(definition_entry(set, name, op));
  j["definition_list"] = std::move(defs);
  Json unsupported = Json::array();
  for (const auto& u : r->unsupported) {
    unsupported.push_back(Json{{"module", u.module},
                               {"component", u.component},
                               {"reason", u.reason},
                               {"severity", severity_name(u.severity)}});
  }
  j["unsupported"] = std::move(unsupported);
  j["inventory"] = onboard::inventory_to_json(onboard::kernel_inventory(*r));
  return j;
}

}  // namespace

Json SiteApi::model(const std::string& id) const {
  const auto set = source_.dataset();
  if (!set) throw Error("dataset", "the server has no dataset loaded");
  std::lock_guard lock(models_->mutex);
  const auto& bundled = models_->load(source_.models_dir);
  if (const auto* m = onboard::find_model(bundled, id)) {
    auto& cached = models_->pages[m->slug];
    if (cached.second.is_null() || cached.first != set->definitions().size())
      cached = {set->definitions().size(), bundled_page(*m, *set)};
    return cached.second;
  }
  const auto others = onboarded_only(*set, bundled);
  const auto it = others.find(id);
  if (it == others.end())
    throw NotFound("model", fmt::format("no bundled model and no dataset definition tagged "
                                        "'model:{}'",
                                        id));
  Json defs = Json::array();
  for (const auto& name : it->second)
    defs.push_back(definition_entry(*set, name, set->definition(name)->op_type));
  return Json{{"id", id},         {"name", id},
              {"bundled", false}, {"in_dataset", it->second.size()},
              {"graph", nullptr}, {"definition_list", std::move(defs)}};
}

}  // namespace fib::serve
