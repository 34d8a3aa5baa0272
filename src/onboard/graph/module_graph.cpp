#include "fib/onboard/module_graph.h"

#include <algorithm>

namespace fib::onboard {

ModuleGraphNode& ModuleGraph::node_for(const ModuleNode& m) {
  for (auto& n : nodes) {
    if (n.key == m.key) return n;
  }
  nodes.push_back({m.key, m.parent, m.block, m.count, {}});
  return nodes.back();
}

void ModuleGraph::insert_sorted(std::vector<std::string>& v, const std::string& s) {
  auto it = std::lower_bound(v.begin(), v.end(), s);
  if (it == v.end() || *it != s) v.insert(it, s);
}

Json module_graph_to_json(const ModuleGraph& g) {
  Json j = Json::object();
  j["id"] = g.id;
  j["name"] = g.name;
  if (!g.description.empty()) j["description"] = g.description;
  Json modules = Json::object();
  for (const auto& n : g.nodes) {
    Json m = Json::object();
    m["count"] = n.count;
    if (!n.parent.empty()) m["parent"] = n.parent;
    m["type"] = n.block ? "block" : "layer";
    m["definitions"] = n.definitions;
    modules[n.key] = std::move(m);
  }
  j["modules"] = std::move(modules);
  return j;
}

}  // namespace fib::onboard
