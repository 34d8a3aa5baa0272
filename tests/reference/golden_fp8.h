// Golden float8 parity data (tests/data/golden_fp8/): inputs made here by
// tests/tools/fp8_golden_gen.cpp, outputs computed once by each corpus definition's own PyTorch
// reference under PyTorch 2.11 on the GPU machine (tools/golden/fp8_golden.sh), so CI, whose
// PyTorch 1.13 has no float8 dtypes, can check the native kernels against them.
//
// The folder holds tensors and a manifest only, never definition text: each case names its
// corpus definition and how it was scaled down (const axes and reference constants, as
// scaled_definition() takes them), and the definition is rebuilt from ../shared/corpus.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fib/base/json.h"
#include "fib/reference/reference.h"
#include "fib/tensor/safetensors.h"
#include "reference/reference_test_util.h"
#include "support/test_paths.h"

namespace fib::testing::golden {

inline std::filesystem::path golden_dir() { return test_data_dir() / "golden_fp8"; }

struct GoldenCase {
  std::string name;        // file stem
  std::string definition;  // corpus definition name
  std::string op_type;
  std::map<std::string, std::int64_t> scaled_axes;  // empty: the definition as it is
  std::map<std::string, std::string> scaled_constants;
  AxisValues var_axes;
  std::uint64_t seed = 0;
  // Where the outputs were made (filled in by tools/golden/fp8_golden.sh collect).
  std::string torch_version, device, date;

  std::filesystem::path inputs_path() const {
    return golden_dir() / (name + ".inputs.safetensors");
  }
  // The PyTorch output of this case computed on `device` ("cpu" or "cuda").
  std::filesystem::path outputs_path(const std::string& where) const {
    return golden_dir() / (name + ".torch-" + where + ".safetensors");
  }
};

inline Json case_to_json(const GoldenCase& c) {
  Json j = Json::object();
  j["name"] = c.name;
  j["definition"] = c.definition;
  j["op_type"] = c.op_type;
  j["scaled_axes"] = Json::object();
  for (const auto& [k, v] : c.scaled_axes) j["scaled_axes"][k] = v;
  j["scaled_constants"] = Json::object();
  for (const auto& [k, v] : c.scaled_constants) j["scaled_constants"][k] = v;
  j["var_axes"] = Json::object();
  for (const auto& [k, v] : c.var_axes) j["var_axes"][k] = v;
  j["seed"] = c.seed;
  return j;
}

inline GoldenCase case_from_json(const Json& j) {
  GoldenCase c;
  c.name = j.at("name").get<std::string>();
  c.definition = j.at("definition").get<std::string>();
  c.op_type = j.at("op_type").get<std::string>();
  for (const auto& [k, v] : j.at("scaled_axes").items()) c.scaled_axes[k] = v.get<std::int64_t>();
  for (const auto& [k, v] : j.at("scaled_constants").items())
    c.scaled_constants[k] = v.get<std::string>();
  for (const auto& [k, v] : j.at("var_axes").items())
    c.var_axes.emplace_back(k, v.get<std::int64_t>());
  c.seed = j.at("seed").get<std::uint64_t>();
  for (auto [key, field] : {std::pair{"torch_version", &c.torch_version},
                            std::pair{"device", &c.device}, std::pair{"date", &c.date}}) {
    if (j.contains(key)) *field = j.at(key).get<std::string>();
  }
  return c;
}

// The case's definition, rebuilt from the corpus.
inline Definition golden_definition(const std::filesystem::path& corpus, const GoldenCase& c) {
  const Definition full = corpus_definition(corpus, c.op_type, c.definition);
  if (c.scaled_axes.empty() && c.scaled_constants.empty()) return full;
  return scaled_definition(full, c.scaled_axes, c.scaled_constants);
}

// Tensors and scalars of a safetensors file written like PythonReferenceBatch's inputs (scalars
// as JSON values under "fib.scalar.<name>" in the metadata).
inline reference::Arguments read_arguments(const std::filesystem::path& path) {
  const auto file = SafetensorsFile::open(path);
  reference::Arguments args;
  for (const auto& key : file.keys()) args.tensors.emplace(key, file.read(key));
  for (const auto& [key, value] : file.header().metadata) {
    static const std::string kPrefix = "fib.scalar.";
    if (key.rfind(kPrefix, 0) != 0) continue;
    const Json v = Json::parse(value);
    Scalar s = std::int64_t{0};
    if (v.is_boolean()) {
      s = v.get<bool>();
    } else if (v.is_number_integer()) {
      s = v.get<std::int64_t>();
    } else {
      s = v.get<double>();
    }
    args.scalars.emplace(key.substr(kPrefix.size()), s);
  }
  return args;
}

inline void write_arguments(const std::filesystem::path& path, const reference::Arguments& args) {
  std::vector<std::pair<std::string, Tensor>> tensors(args.tensors.begin(), args.tensors.end());
  std::map<std::string, std::string> meta;
  for (const auto& [name, value] : args.scalars) {
    Json v;
    std::visit([&v](auto x) { v = x; }, value);
    meta["fib.scalar." + name] = v.dump();
  }
  write_safetensors(path, tensors, meta);
}

}  // namespace fib::testing::golden
