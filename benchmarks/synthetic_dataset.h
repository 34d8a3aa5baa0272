// A synthetic FlashInfer-Trace dataset for the benchmarks: definitions of several op types,
// workloads (with safetensors blobs for index inputs), solutions by several authors, and
// evaluation traces spread over the canonical traces/<author>/<op_type>/<definition>.jsonl
// files. Deterministic for a given spec; written with streaming so generating it does not
// raise the process's peak memory much.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace fib::bench {

struct SyntheticSpec {
  std::size_t definitions = 20;
  std::size_t solutions_per_definition = 10;
  std::size_t workloads_per_definition = 50;
  std::size_t traces = 100'000;  // spread evenly over (solution, workload) pairs
  std::uint64_t seed = 20250101;
};

struct SyntheticStats {
  std::size_t definitions = 0;
  std::size_t workloads = 0;
  std::size_t solutions = 0;
  std::size_t traces = 0;
  std::size_t blobs = 0;
  std::size_t record_files = 0;    // .json / .jsonl files TraceSet::load reads
  std::uint64_t record_bytes = 0;  // their total size
  std::uint64_t blob_bytes = 0;
};

// Writes the dataset under `root` (created; must not exist or be empty).
SyntheticStats write_synthetic_dataset(const std::filesystem::path& root,
                                       const SyntheticSpec& spec);

// A dataset generated once per process in a fresh temporary folder, removed at exit (set
// FIB_BENCH_KEEP=1 to keep it; its path is printed). FIB_BENCH_TRACES overrides spec.traces.
struct SharedSynthetic {
  std::filesystem::path root;
  SyntheticStats stats;
  double generate_seconds = 0;
};
const SharedSynthetic& shared_synthetic_dataset();

}  // namespace fib::bench
