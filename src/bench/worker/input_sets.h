// The input sets of one workload travel to the workers as one safetensors file: tensor "<k>/<name>"
// is input <name> of set k, metadata "fib.scalar.<k>/<name>" its scalar inputs (JSON), and
// "fib.sets" the number of sets. One file, opened and mapped once, keeps the per-evaluation
// cost of hundreds of distinct timing sets small.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fib/reference/reference.h"
#include "fib/tensor/inputs.h"
#include "fib/trace/definition.h"

namespace fib::bench::detail {

struct InputSet {
  std::map<std::string, Tensor, std::less<>> tensors;
  std::map<std::string, Scalar, std::less<>> scalars;
};

void write_input_sets(const std::filesystem::path& path, const Definition& def,
                      const std::vector<MaterializedInputs>& sets);
std::vector<InputSet> read_input_sets(const std::filesystem::path& path);
// Set k alone, as reference arguments.
reference::Arguments read_input_set(const std::filesystem::path& path, int k);

}  // namespace fib::bench::detail
