// The input sets of one workload travel to the workers as one safetensors file: tensor "<k>/<name>"
// is input <name> of set k, metadata "fib.scalar.<k>/<name>" its scalar inputs (JSON), and
// "fib.sets" the number of sets. One file, mapped once per worker, keeps the per-evaluation
// cost of hundreds of distinct timing sets small: workers hand the solution pointers into the
// read-only mapping (nothing copied per call; a write to an input faults, and the worker names
// the input). Every tensor starts 64-byte aligned, and the sets lie in the file in a shuffled
// order, so a set's address says nothing about whether its call is checked. A tensor made where it
// is used (a bulk fill deferred for a CUDA device: counter-based, the same bytes on any device)
// travels as its fill instead of its bytes: metadata "fib.fill.<k>/<name>" (JSON).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fib/reference/reference.h"
#include "fib/tensor/inputs.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"

namespace fib::bench::detail {

// An input tensor's checksum: XXH3-128 of the bytes where they fit in one chunk, else XXH3-128
// over the XXH3-128 of each chunk, so the chunks of a large tensor can be hashed in parallel.
struct InputSum {
  std::uint64_t high = 0, low = 0;
  bool operator==(const InputSum&) const = default;
};
inline constexpr std::size_t kInputSumChunk = std::size_t{1} << 20;
InputSum input_sum(const void* data, std::size_t bytes);
// The parts of input_sum: the digest of one chunk (or of a tensor of one chunk at most), and the
// checksum of a tensor of several chunks from their digests, in order.
InputSum chunk_sum(const void* data, std::size_t bytes);
InputSum combine_chunk_sums(const InputSum* chunks, std::size_t count);

struct InputSet {
  std::map<std::string, Tensor, std::less<>> tensors;
  std::map<std::string, Scalar, std::less<>> scalars;
  // Each tensor's checksum as the orchestrator took it from the bytes it wrote (metadata
  // "fib.xxh3.<k>/<name>"): a worker holds its mapping against these instead of hashing every
  // set before the first call. Empty where the file has none.
  std::map<std::string, InputSum, std::less<>> sums;
  // Tensors the file holds as their bulk fills (make_bulk_fill makes them, on the host or a
  // device); absent from `tensors`.
  std::map<std::string, BulkFill, std::less<>> fills;
};

// A bulk fill as the file writes it (every float by its bits, so it reads back exactly), and
// back; from_json throws fib::Error for a malformed one.
Json bulk_fill_json(const BulkFill& fill);
BulkFill bulk_fill_from_json(const Json& j);

// Makes the set's fills on the host (into `tensors`), for the places that need every input there.
void make_fills_on_host(InputSet& set);

// The inputs the sets share: those carried as the same fill by two or more sets (the weights a
// large workload's checked sets share, prepare.h). A device holds each once, and the timing
// pool's sets take them as they are (device_pool.h). From read sets, or from the file's metadata
// alone (no tensor read).
std::set<std::string, std::less<>> shared_fills(const std::vector<InputSet>& sets);
std::set<std::string, std::less<>> shared_fills(const std::filesystem::path& path);

// A set's tensors' checksums (by name) and a digest of the whole set (names, dtypes, shapes,
// checksums and scalars; a deferred bulk fill by its fill and the synthesis version, which
// determine its bytes): its content address.
struct InputSetDigest {
  std::map<std::string, InputSum, std::less<>> sums;
  std::string digest;  // hex
};
InputSetDigest digest_input_set(const MaterializedInputs& set);

// Makes the set's deferred fills on the host (into `tensors`), their checksums added to
// `digest.sums`. The digest itself stays the one taken from the fills: a set made on the host
// and the same set made on a device from its fills have one content address, and the device
// path never needs host bytes to be hashed.
void make_deferred_on_host(MaterializedInputs& set, InputSetDigest& digest);

// `layout_seed` draws the order of the sets in the file; `digests` (one per set, or empty) are
// written as the tensors' checksums; each set's deferred bulk fills are written as fills.
void write_input_sets(const std::filesystem::path& path, const Definition& def,
                      const std::vector<MaterializedInputs>& sets, std::uint64_t layout_seed,
                      const std::vector<InputSetDigest>& digests = {});
// Maps the file read-only (pages populated up front, so no page fault lands in a timed call);
// the tensors are views into the mapping, which lives as long as any of them.
std::vector<InputSet> read_input_sets(const std::filesystem::path& path);
// Set k alone, as reference arguments (its fills made on the host).
reference::Arguments read_input_set(const std::filesystem::path& path, int k);

}  // namespace fib::bench::detail
