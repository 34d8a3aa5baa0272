#include "bench/worker/input_sets.h"

#include <fmt/format.h>

#include "fib/tensor/safetensors.h"

namespace fib::bench::detail {

namespace {
Scalar scalar_from_json(const std::string& text) {
  const Json j = Json::parse(text);
  if (j.is_boolean()) return Scalar{j.get<bool>()};
  if (j.is_number_integer()) return Scalar{j.get<std::int64_t>()};
  return Scalar{j.get<double>()};
}

// Splits "<k>/<name>" into k and name; false for keys of another shape.
bool split_key(const std::string& key, int* k, std::string* name) {
  const auto slash = key.find('/');
  if (slash == std::string::npos || slash == 0) return false;
  try {
    *k = std::stoi(key.substr(0, slash));
  } catch (const std::exception&) {
    return false;
  }
  *name = key.substr(slash + 1);
  return true;
}
}  // namespace

void write_input_sets(const std::filesystem::path& path, const Definition& def,
                      const std::vector<MaterializedInputs>& sets) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> meta;
  meta["fib.sets"] = std::to_string(sets.size());
  for (std::size_t k = 0; k < sets.size(); ++k) {
    for (const auto& spec : def.inputs) {
      if (auto it = sets[k].tensors.find(spec.name); it != sets[k].tensors.end()) {
        tensors.emplace_back(fmt::format("{}/{}", k, spec.name), it->second);
      }
      if (auto it = sets[k].scalars.find(spec.name); it != sets[k].scalars.end()) {
        const Json v = std::visit([](auto x) { return Json(x); }, it->second);
        meta.emplace(fmt::format("fib.scalar.{}/{}", k, spec.name), v.dump());
      }
    }
  }
  write_safetensors(path, tensors, meta);
}

std::vector<InputSet> read_input_sets(const std::filesystem::path& path) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  const auto& meta = f.header().metadata;
  std::size_t count = 0;
  bool found = false;
  for (const auto& [k, v] : meta) {
    if (k == "fib.sets") {
      count = std::stoul(v);
      found = true;
    }
  }
  if (!found) throw Error(path.string(), "not an input-set file (no fib.sets)");
  std::vector<InputSet> sets(count);
  int k = 0;
  std::string name;
  for (const auto& key : f.keys()) {
    if (split_key(key, &k, &name) && k >= 0 && static_cast<std::size_t>(k) < sets.size()) {
      sets[static_cast<std::size_t>(k)].tensors.emplace(name, f.read(key));
    }
  }
  for (const auto& [key, v] : meta) {
    if (key.rfind("fib.scalar.", 0) != 0) continue;
    if (split_key(key.substr(11), &k, &name) && k >= 0 &&
        static_cast<std::size_t>(k) < sets.size()) {
      sets[static_cast<std::size_t>(k)].scalars.emplace(name, scalar_from_json(v));
    }
  }
  return sets;
}

reference::Arguments read_input_set(const std::filesystem::path& path, int k) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  reference::Arguments a;
  const std::string prefix = fmt::format("{}/", k);
  for (const auto& key : f.keys()) {
    if (key.rfind(prefix, 0) == 0) a.tensors.emplace(key.substr(prefix.size()), f.read(key));
  }
  for (const auto& [key, v] : f.header().metadata) {
    if (key.rfind("fib.scalar." + prefix, 0) == 0) {
      a.scalars.emplace(key.substr(11 + prefix.size()), scalar_from_json(v));
    }
  }
  return a;
}

}  // namespace fib::bench::detail
