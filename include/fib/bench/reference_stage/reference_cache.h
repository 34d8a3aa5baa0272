// Reference outputs kept across runs (`--reference-cache DIR|off`): content-addressed entries on
// disk, keyed by what the outputs depend on (the reference's identity, the workload, the input
// set's content), so a rerun on the same inputs skips the reference. The folder is fib's alone:
// it lies outside everything a solution worker's sandbox binds and outside the run's scratch
// folder, and entries are copied out (never linked) into the workload's folder, which no worker
// sees either. Each entry carries a hash of its bytes: a damaged one is found, removed and
// recomputed. Writes are atomic (a temporary file renamed into place), so concurrent runs
// share the folder; the oldest entries go once it holds more than its size bound.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fib/base/device.h"
#include "fib/bench/reference_stage/reference_run.h"
#include "fib/trace/definition.h"
#include "fib/trace/json_reader.h"
#include "fib/trace/workload.h"

namespace fib::bench::detail {

// Bumped whenever a native reference kernel changes its outputs or the cache's key or layout
// changes: every older entry then misses.
inline constexpr int kReferenceCacheVersion = 2;

struct ReferenceCacheCounts {
  std::size_t hits = 0, misses = 0, stores = 0, corrupt = 0, evicted = 0;
};

class ReferenceCache {
 public:
  ReferenceCache(std::filesystem::path dir, std::uint64_t max_bytes);

  const std::filesystem::path& dir() const { return dir_; }
  // Copies entry `key` to the file `to` (written atomically); false, counted a miss, when it is
  // absent or damaged (then removed).
  bool fetch_file(const std::string& key, const std::filesystem::path& to);
  std::optional<Json> fetch_json(const std::string& key);
  // Stores the file's bytes (or the JSON) under `key`, then evicts the least recently used
  // entries beyond the size bound. A store that fails (a full disk) leaves the cache as it was.
  void store_file(const std::string& key, const std::filesystem::path& from);
  void store_json(const std::string& key, const Json& value);
  ReferenceCacheCounts counts() const;

 private:
  std::optional<std::string> fetch(const std::string& key);
  void store(const std::string& key, const std::string& bytes);
  void evict();
  std::filesystem::path entry_path(const std::string& key) const;

  std::filesystem::path dir_;
  std::uint64_t max_bytes_;
  mutable std::mutex mu_;
  ReferenceCacheCounts counts_;
  // The folder's size as last scanned plus what was stored since: the folder is scanned again
  // only once this passes the bound.
  std::optional<std::uint64_t> bytes_;
};

// The default folder: "reference" beside the build cache's folder (--build-cache DIR, else
// $FIB_CACHE_DIR or ~/.cache/fib/build).
std::filesystem::path default_reference_cache_dir(const std::filesystem::path& build_cache);

// Hex digest (XXH3, 128 bits) of the parts, each length-prefixed.
std::string content_key(const std::vector<std::string>& parts);

// What a reference's outputs depend on besides its inputs: which reference (native on this
// device kind at kReferenceCacheVersion, or the definition's PyTorch code under that
// interpreter), the whole definition, the workload and the definition-wide settings.
std::string reference_identity(const Definition& def, const Workload& w, ReferenceKind kind,
                               const Device& device, const std::string& python,
                               const Json& eval_extra);

// The key of the reference's outputs on input set `set` of a prepared workload.
std::string reference_set_key(const PreparedInputs& p, int set);

// The reference's run on a prepared workload, as a cache entry: its timing (the latency it
// reports is the one measured when the entry was made, on the same hardware, inputs and
// schedule) and its outputs, restored into the workload's folder on a hit.
std::string reference_run_key(const PreparedInputs& p, const std::string& hardware,
                              const std::string& timer);
bool restore_reference_run(ReferenceCache& cache, const std::string& key, PreparedInputs& p,
                           ReferenceRun* run);
void save_reference_run(ReferenceCache& cache, const std::string& key, const PreparedInputs& p,
                        const ReferenceRun& run);

}  // namespace fib::bench::detail
