// ServeContext: the dataset snapshot the routes read, reloaded when it changes.
#include <xxhash.h>

#include <cstdlib>

#include "fib/serve/server.h"

#ifndef FIB_SOURCE_DIR
#define FIB_SOURCE_DIR ""
#endif

namespace fib::serve {

namespace fs = std::filesystem;

namespace {

constexpr auto kDiskCheckInterval = std::chrono::seconds(1);
constexpr const char* kDatasetFolders[] = {"definitions", "workloads", "solutions", "traces"};

}  // namespace

ServeContext::ServeContext(fs::path dataset, std::string baseline_author, fs::path state_dir)
    : dataset_(std::move(dataset)),
      baseline_author_(std::move(baseline_author)),
      state_dir_(std::move(state_dir)) {
  snapshot_fingerprint_ = fingerprint();
  snapshot_ = std::make_shared<const TraceSet>(TraceSet::load(dataset_));
  checked_ = std::chrono::steady_clock::now();
}

// The paths, sizes and modification times of the dataset's files, hashed: appends change a
// size, atomic replacements a time, new files a path.
std::uint64_t ServeContext::fingerprint() const {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::error_code ec;
  for (const char* top : kDatasetFolders) {
    for (fs::recursive_directory_iterator it(dataset_ / top, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      const std::string path = it->path().string();
      const std::uint64_t stamp[2] = {
          static_cast<std::uint64_t>(it->file_size(ec)),
          static_cast<std::uint64_t>(it->last_write_time(ec).time_since_epoch().count())};
      XXH3_64bits_update(state, path.data(), path.size() + 1);
      XXH3_64bits_update(state, stamp, sizeof stamp);
    }
    ec.clear();
  }
  const std::uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return digest;
}

std::shared_ptr<const TraceSet> ServeContext::traces() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  bool stale = changed_.exchange(false);
  if (!stale && now - checked_ >= kDiskCheckInterval) {
    checked_ = now;
    stale = fingerprint() != snapshot_fingerprint_;
  }
  if (stale) {
    // The fingerprint is taken before loading: a write during the load changes it again, so the
    // next check reloads rather than keeping a snapshot that misses it.
    snapshot_fingerprint_ = fingerprint();
    snapshot_ = std::make_shared<const TraceSet>(TraceSet::load(dataset_));
    checked_ = now;
  }
  return snapshot_;
}

fs::path find_web_dir(const fs::path& flag) {
  if (!flag.empty()) {
    if (fs::is_directory(flag)) return flag;
    throw Error(flag.string(), "--web-dir does not name a folder",
                "point it at the web/ folder of a fib checkout");
  }
  if (const char* env = std::getenv("FIB_WEB_DIR"); env && *env) {
    if (fs::is_directory(env)) return env;
    throw Error(env, "FIB_WEB_DIR does not name a folder", "unset it to use the bundled site");
  }
  std::vector<fs::path> candidates;
  if (*FIB_SOURCE_DIR) candidates.push_back(fs::path(FIB_SOURCE_DIR) / "web");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share" / "fib" / "web");
  for (const auto& c : candidates) {
    if (fs::is_directory(c)) return c;
  }
  return {};
}

}  // namespace fib::serve
