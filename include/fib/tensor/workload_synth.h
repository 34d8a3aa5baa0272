// Workload synthesis: realistic new workloads for any definition — batch sizes, sequence-length
// mixes and paged-cache sizes for decode, prefill or mixed serving — whose axes satisfy the
// definition's constraints. Inputs are left to structure-aware synthesis at run time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fib/trace/definition.h"
#include "fib/trace/workload.h"

namespace fib {

enum class WorkloadPreset : std::uint8_t { kDecode, kPrefill, kMixed };
std::optional<WorkloadPreset> parse_workload_preset(std::string_view name);
std::string_view workload_preset_name(WorkloadPreset p);

struct SynthOptions {
  WorkloadPreset preset = WorkloadPreset::kMixed;
  int count = 4;
  std::uint64_t seed = 0;
  // Upper bound on tokens in flight (queries) and keys per sequence; small values make
  // workloads that run in milliseconds on a CPU.
  std::int64_t max_tokens = 8192;
  std::int64_t max_kv_len = 8192;
};

// `count` workloads with fresh uuids. Throws fib::Error naming a var axis the synthesizer does
// not know how to size.
std::vector<Workload> synthesize_workloads(const Definition& def, const SynthOptions& options);

}  // namespace fib
