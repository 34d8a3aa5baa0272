// Input materialization: turns a workload's input specs into tensors and scalars — scalars as
// given, safetensors blobs loaded (shape and dtype checked), and everything else synthesized
// from a seed, structure-aware per op family (valid indptr/indices/page tables, causal q/kv
// lengths, routing logits and scales, probability rows), so every synthesized set satisfies
// the definition's constraints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fib/tensor/counter_random.h"
#include "fib/tensor/tensor.h"
#include "fib/trace/constraint.h"
#include "fib/trace/definition.h"
#include "fib/trace/workload.h"

namespace fib {

// The version of the input synthesis: which values a seed gives. Traces record it
// (environment.extra.input_synthesis) and `fib inputs` writes it, since the same seed gives
// other tensors under another version. 1: sequential xoshiro256** streams per chunk of 2^20
// elements; 2: counter-based Philox4x32-10 values per element (counter_random.h), the same on
// the CPU and a CUDA device.
inline constexpr int kInputSynthesisVersion = 2;

// A bulk fill: every element drawn independently from `spec` by the counter-based stream `key`
// (Rng::derive(seed, the input's name)), so it can be made on any device, in any split.
struct BulkFill {
  counter_random::FillSpec spec;
  std::uint64_t key = 0;
  DType dtype = DType::kFloat32;
  Shape shape;
};
// Makes a bulk fill on the host, threads splitting the index range (the same bytes whatever
// their number).
Tensor make_bulk_fill(const BulkFill& fill);
// Throws fib::Error where the distribution does not suit the dtype (integers into a float
// tensor, or the reverse).
void check_bulk_fill(const BulkFill& fill);

enum class InputOrigin : std::uint8_t {
  kScalar,       // a scalar value from the workload
  kBlob,         // read from the workload's safetensors blob
  kSynthesized,  // made by the op family's recipe (structure-aware)
  kRandom,       // seeded random values of the dtype
};
std::string_view input_origin_name(InputOrigin o);

struct MaterializedInputs {
  std::map<std::string, Tensor, std::less<>> tensors;
  std::map<std::string, Scalar, std::less<>> scalars;
  std::map<std::string, InputOrigin, std::less<>> origins;
  // What was not taken from the workload as written, e.g. a missing blob replaced by a
  // synthesized tensor, or a random scalar given its conventional value.
  std::vector<std::string> notes;
  std::uint64_t seed = 0;
  // With MaterializeOptions::defer_bulk_fills: the bulk fills not made, for a device to make
  // (their inputs are absent from `tensors`; `origins` has them).
  std::map<std::string, BulkFill, std::less<>> deferred;
};

struct MaterializeOptions {
  std::uint64_t seed = 0;
  std::filesystem::path dataset_root;  // blob paths are relative to it
  bool use_blobs = true;               // false: synthesize even where a blob exists
  // Only integer and bool tensors (indices, offsets, page tables) and scalars: checks the index
  // structure of full-size workloads without allocating their float tensors.
  bool integers_only = false;
  // Only scalars (their given or conventional values): how workload synthesis fills them in.
  bool scalars_only = false;
  // Records the bulk fills (weights, activations, caches) in MaterializedInputs::deferred
  // instead of making them: the structure is made on the host, the bulk where it is needed.
  bool defer_bulk_fills = false;
};

// Materializes every input of `w` (throws fib::Error when a blob disagrees with the
// definition, or the axes admit no valid input, e.g. page indices into an empty cache).
MaterializedInputs materialize_inputs(const Definition& def, const Workload& w,
                                      const MaterializeOptions& options);

// Evaluates the definition's constraints on the materialized data; returns one message per
// violated or unevaluable constraint (empty when all hold).
std::vector<std::string> check_input_constraints(const Definition& def, const Workload& w,
                                                 const MaterializedInputs& inputs);

// Whether fib knows how to make the op type's inputs: a structure-aware recipe
// (src/tensor/recipes/<op_type>.cpp), or plain random values being right for it (gemm, rmsnorm).
bool has_input_recipe(std::string_view op_type);

}  // namespace fib
