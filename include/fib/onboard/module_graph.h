// The model's module graph for the web UI (`{id, name, description, modules: {name: {count,
// parent, type, definitions}}}`): blocks and layers with counts, parents, and the definitions
// each module uses across every serving point onboarded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fib/onboard/plan.h"
#include "fib/trace/json_reader.h"

namespace fib::onboard {

struct ModuleGraphNode {
  std::string key;
  std::string parent;
  bool block = false;
  std::int64_t count = 1;
  std::vector<std::string> definitions;  // sorted, unique
};

struct ModuleGraph {
  std::string id;  // model slug
  std::string name;
  std::string description;
  std::vector<ModuleGraphNode> nodes;  // parents before children

  // Adds the modules of one expansion; `name_of` maps each kernel use to its final definition
  // name (after deduplication renames). Modules seen before merge their definitions.
  template <typename NameOf>
  void add(const Expansion& e, NameOf&& name_of) {
    for (const auto& m : e.modules) {
      ModuleGraphNode& node = node_for(m);
      for (const auto& use : m.kernels) {
        const std::string n = name_of(use);
        if (!n.empty()) insert_sorted(node.definitions, n);
      }
    }
  }

 private:
  ModuleGraphNode& node_for(const ModuleNode& m);
  static void insert_sorted(std::vector<std::string>& v, const std::string& s);
};

Json module_graph_to_json(const ModuleGraph& g);

}  // namespace fib::onboard
