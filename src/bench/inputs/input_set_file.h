// The input sets of one workload travel to the workers as one safetensors file: tensor "<k>/<name>"
// is input <name> of set k, metadata "fib.scalar.<k>/<name>" its scalar inputs (JSON), and
// "fib.sets" the number of sets. One file, mapped once per worker, keeps the per-evaluation
// cost of hundreds of distinct timing sets small: workers hand the solution pointers into the
// read-only mapping (nothing copied per call; a write to an input faults, and the worker names
// the input). Every tensor starts 64-byte aligned, and the sets lie in the file in a shuffled
// order, so a set's address says nothing about whether its call is checked.
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

// `layout_seed` draws the order of the sets in the file.
void write_input_sets(const std::filesystem::path& path, const Definition& def,
                      const std::vector<MaterializedInputs>& sets, std::uint64_t layout_seed);
// Maps the file read-only (pages populated up front, so no page fault lands in a timed call);
// the tensors are views into the mapping, which lives as long as any of them.
std::vector<InputSet> read_input_sets(const std::filesystem::path& path);
// Set k alone, as reference arguments.
reference::Arguments read_input_set(const std::filesystem::path& path, int k);

}  // namespace fib::bench::detail
