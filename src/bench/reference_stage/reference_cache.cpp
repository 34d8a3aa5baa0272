#include "fib/bench/reference_stage/reference_cache.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "fib/base/files.h"
#include "fib/bench/builder/build.h"
#include "fib/bench/protocol/requests.h"

namespace fib::bench::detail {

namespace fs = std::filesystem;

namespace {

// An entry's file: this magic, the XXH3-128 of the payload (16 bytes), the payload.
constexpr std::array<char, 8> kMagic = {'F', 'I', 'B', 'R', 'E', 'F', '0', '1'};
constexpr std::size_t kHeader = kMagic.size() + 16;

std::string hex128(XXH128_hash_t h) { return fmt::format("{:016x}{:016x}", h.high64, h.low64); }

std::optional<std::string> read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(s).str();
}

// Writes `bytes` to `path` atomically (a reader sees the old file or the whole new one), readable
// by fib's user only; false when it could not be written. Not fsynced: any run remakes an entry.
bool write_atomically(const fs::path& path, const std::string& bytes) {
  try {
    write_file_atomic(path, bytes, {.durable = false, .mode = 0600});
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

ReferenceCache::ReferenceCache(fs::path dir, std::uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {
  // The outputs are the answers a solution is judged by: a folder fib makes only fib's user
  // reads (one given that exists keeps its mode).
  if (fs::create_directories(dir_)) {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace);
  }
}

fs::path ReferenceCache::entry_path(const std::string& key) const {
  return dir_ / key.substr(0, 2) / key;
}

std::optional<std::string> ReferenceCache::fetch(const std::string& key) {
  const fs::path path = entry_path(key);
  std::optional<std::string> bytes = read_whole(path);
  std::lock_guard<std::mutex> lock(mu_);
  if (!bytes) {
    ++counts_.misses;
    return std::nullopt;
  }
  const bool intact = bytes->size() >= kHeader &&
                      std::memcmp(bytes->data(), kMagic.data(), kMagic.size()) == 0 && [&] {
                        const XXH128_hash_t h =
                            XXH3_128bits(bytes->data() + kHeader, bytes->size() - kHeader);
                        XXH128_canonical_t c;
                        XXH128_canonicalFromHash(&c, h);
                        return std::memcmp(bytes->data() + kMagic.size(), c.digest, 16) == 0;
                      }();
  std::error_code ec;
  if (!intact) {
    fs::remove(path, ec);
    ++counts_.corrupt;
    ++counts_.misses;
    return std::nullopt;
  }
  // Its use is what keeps an entry from eviction.
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
  ++counts_.hits;
  return bytes->substr(kHeader);
}

void ReferenceCache::store(const std::string& key, const std::string& payload) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(payload.data(), payload.size()));
  std::string bytes(kMagic.data(), kMagic.size());
  bytes.append(reinterpret_cast<const char*>(c.digest), 16);
  bytes += payload;
  if (!write_atomically(entry_path(key), bytes)) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.stores;
  if (bytes_) *bytes_ += bytes.size();
  if (!bytes_ || *bytes_ > max_bytes_) evict();
}

// Under mu_: the least recently used entries go until the folder fits its bound.
void ReferenceCache::evict() {
  struct Entry {
    fs::path path;
    std::uint64_t bytes;
    fs::file_time_type used;
  };
  std::vector<Entry> entries;
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir_, ec)) {
    // Entries are named by their keys; a name starting with '.' is a write in progress.
    if (!e.is_regular_file(ec) || e.path().filename().string().starts_with('.')) continue;
    const std::uint64_t n = e.file_size(ec);
    entries.push_back({e.path(), n, e.last_write_time(ec)});
    total += n;
  }
  bytes_ = total;
  if (total <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    if (fs::remove(e.path, ec)) {
      total -= e.bytes;
      ++counts_.evicted;
    }
  }
  bytes_ = total;
}

bool ReferenceCache::fetch_file(const std::string& key, const fs::path& to) {
  const std::optional<std::string> payload = fetch(key);
  return payload && write_atomically(to, *payload);
}

std::optional<Json> ReferenceCache::fetch_json(const std::string& key) {
  const std::optional<std::string> payload = fetch(key);
  if (!payload) return std::nullopt;
  try {
    return Json::parse(*payload);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void ReferenceCache::store_file(const std::string& key, const fs::path& from) {
  if (const std::optional<std::string> bytes = read_whole(from)) store(key, *bytes);
}

void ReferenceCache::store_json(const std::string& key, const Json& value) {
  store(key, value.dump());
}

ReferenceCacheCounts ReferenceCache::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

fs::path default_reference_cache_dir(const fs::path& build_cache) {
  const fs::path build = build_cache.empty() ? default_cache_dir() : build_cache;
  return fs::absolute(build).lexically_normal().parent_path() / "reference";
}

std::string content_key(const std::vector<std::string>& parts) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  for (const std::string& p : parts) {
    const std::uint64_t n = p.size();
    XXH3_128bits_update(state, &n, sizeof n);
    XXH3_128bits_update(state, p.data(), p.size());
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return hex128(h);
}

std::string reference_identity(const Definition& def, const Workload& w, ReferenceKind kind,
                               const Device& device, const std::string& python,
                               const Json& eval_extra) {
  const bool native = kind != ReferenceKind::kPython;
  return content_key({fmt::format("fib-reference/v{}", kReferenceCacheVersion),
                      native ? "native" : "python:" + python, device.is_cuda() ? "cuda" : "cpu",
                      to_json(def).dump(), to_json(w).dump(), eval_extra.dump()});
}

std::string reference_set_key(const PreparedInputs& p, int set) {
  return content_key(
      {"set", p.reference_identity, p.set_digests.at(static_cast<std::size_t>(set))});
}

std::string reference_run_key(const PreparedInputs& p, const std::string& hardware,
                              const std::string& timer) {
  std::vector<std::string> parts{"run", p.reference_identity, hardware, timer,
                                 protocol::to_json(p.schedule).dump()};
  parts.insert(parts.end(), p.set_digests.begin(), p.set_digests.end());
  return content_key(parts);
}

namespace {

fs::path extra_set_file(const PreparedInputs& p, int set) {
  return p.dir / fmt::format("reference-set{}.safetensors", set);
}

}  // namespace

bool restore_reference_run(ReferenceCache& cache, const std::string& key, PreparedInputs& p,
                           ReferenceRun* run) {
  const std::optional<Json> entry = cache.fetch_json(key);
  if (!entry) return false;
  try {
    const std::vector<std::string> files =
        check_output_files(with_check_outputs(p.schedule, p.dir, "reference"));
    for (int t = 0; t < p.trials; ++t) {
      if (!cache.fetch_file(reference_set_key(p, checked_set(p, t)),
                            files.at(static_cast<std::size_t>(t))))
        return false;
    }
    for (const int set : entry->at("extra_sets").get<std::vector<int>>()) {
      if (!cache.fetch_file(reference_set_key(p, set), extra_set_file(p, set))) return false;
    }
    ReferenceRun r;
    r.ok = true;
    r.kind = entry->at("kind").get<std::string>() == "python" ? ReferenceKind::kPython
                                                              : ReferenceKind::kNative;
    r.kernel = entry->at("kernel").get<std::string>();
    r.runtime = entry->at("runtime");
    const Json& t = entry->at("timing");
    r.timing.latency_ms = t.at("latency_ms").get<double>();
    r.timing.detail = t.at("detail");
    r.timing.timed_ms = t.at("timed_ms").get<double>();
    r.timing.warmup_ms = t.at("warmup_ms").get<double>();
    r.timing.ok = t.at("ok").get<bool>();
    p.reference_outputs = files;
    *run = std::move(r);
    return true;
  } catch (const std::exception&) {
    return false;  // an entry of another layout: the reference runs
  }
}

void save_reference_run(ReferenceCache& cache, const std::string& key, const PreparedInputs& p,
                        const ReferenceRun& run) {
  for (int t = 0; t < p.trials; ++t) {
    cache.store_file(reference_set_key(p, checked_set(p, t)),
                     p.reference_outputs.at(static_cast<std::size_t>(t)));
  }
  // Outputs on other sets the reference made with its run (the PyTorch reference's pool).
  Json extra = Json::array();
  std::error_code ec;
  for (int set = p.trials; set < p.trials + p.pool; ++set) {
    if (!fs::exists(extra_set_file(p, set), ec)) continue;
    cache.store_file(reference_set_key(p, set), extra_set_file(p, set));
    extra.push_back(set);
  }
  const Json timing{{"latency_ms", run.timing.latency_ms},
                    {"detail", run.timing.detail},
                    {"timed_ms", run.timing.timed_ms},
                    {"warmup_ms", run.timing.warmup_ms},
                    {"ok", run.timing.ok}};
  cache.store_json(key, Json{{"kind", run.kind == ReferenceKind::kPython ? "python" : "native"},
                             {"kernel", run.kernel},
                             {"runtime", run.runtime},
                             {"timing", timing},
                             {"extra_sets", extra}});
}

}  // namespace fib::bench::detail
