// ServeContext: the dataset snapshot the routes read, replaced when the dataset changes.
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>

#include "fib/serve/server.h"

#include "fib/base/json.h"
#include "fib/dataset/layout.h"

#ifndef FIB_SOURCE_DIR
#define FIB_SOURCE_DIR ""
#endif

namespace fib::serve {

namespace fs = std::filesystem;

namespace {

constexpr auto kDiskCheckInterval = std::chrono::seconds(1);
constexpr auto kSettleTime = std::chrono::milliseconds(250);
constexpr const char* kDatasetFolders[] = {"definitions", "workloads", "solutions", "traces"};

// Whether `set` holds `t` already (the same line for the same workload), looking at the most
// recent traces first: a reload can pick up a trace the server appended before it applies it.
bool holds_trace(const TraceSet& set, const Trace& t) {
  const auto& list = set.traces(t.definition);
  std::string line;
  for (auto it = list.rbegin(); it != list.rend(); ++it) {
    const Trace& r = it->value;
    if (r.workload.uuid != t.workload.uuid || r.solution != t.solution) continue;
    if (r.evaluation && t.evaluation && r.evaluation->timestamp != t.evaluation->timestamp)
      continue;
    if (line.empty()) line = dump_json_line(to_json(t));
    if (dump_json_line(to_json(r)) == line) return true;
  }
  return false;
}

// `set` plus those of `traces` it does not hold yet, or `set` itself when it holds them all.
std::shared_ptr<const TraceSet> with_new_traces(std::shared_ptr<const TraceSet> set,
                                                std::span<const Trace> traces) {
  std::vector<Trace> fresh;
  for (const Trace& t : traces) {
    if (!holds_trace(*set, t)) fresh.push_back(t);
  }
  if (fresh.empty()) return set;
  Diagnostics diag;
  auto next = std::make_shared<const TraceSet>(set->with_traces(fresh, diag));
  if (!diag.empty()) {
    std::cerr << fmt::format("fib serve: traces the server appended were not taken:\n{}",
                             diag.to_string());
  }
  return next;
}

// The records a load skipped, on stderr: served datasets are edited by hand and by tools, and a
// record that silently vanished from the leaderboard is a lost result to its author. The first
// few are listed; `fib validate` lists them all.
void report_load_problems(const TraceSet& set) {
  constexpr std::size_t kListed = 10;
  const std::size_t errors = set.load_diagnostics().count(Severity::kError);
  if (errors == 0) return;
  std::cerr << fmt::format("fib serve: {} record(s) failed to load and are not served:\n", errors);
  std::size_t listed = 0;
  for (const Diagnostic& d : set.load_diagnostics()) {
    if (d.severity != Severity::kError) continue;
    if (listed++ == kListed) break;
    std::cerr << "  " << d.to_string() << "\n";
  }
  if (errors > kListed) {
    std::cerr << fmt::format("  ... and {} more: `fib validate --local {}` lists them all\n",
                             errors - kListed, set.root().string());
  }
}

}  // namespace

ServeContext::ServeContext(fs::path dataset, std::string baseline_author, fs::path state_dir)
    : dataset_(std::move(dataset)),
      baseline_author_(std::move(baseline_author)),
      state_dir_(std::move(state_dir)) {
  // Scanned before loading: a write during the load changes the files again, so the watcher
  // reloads rather than keeping a snapshot that misses it.
  expected_ = disk_state();
  snapshot_ = std::make_shared<const TraceSet>(TraceSet::load(dataset_));
  report_load_problems(*snapshot_);
  watcher_ = std::thread([this] { watch(); });
}

ServeContext::~ServeContext() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

std::shared_ptr<const TraceSet> ServeContext::traces() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

std::optional<ServeContext::FileStamp> ServeContext::stamp_of(const fs::path& file) const {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (ec) return std::nullopt;
  const auto time = fs::last_write_time(file, ec);
  if (ec) return std::nullopt;
  return FileStamp{size, static_cast<std::int64_t>(time.time_since_epoch().count()), false};
}

// The paths, sizes and modification times of the dataset's files: appends change a size, atomic
// replacements a time, new files a path.
ServeContext::DiskState ServeContext::disk_state() const {
  DiskState out;
  std::error_code ec;
  for (const char* top : kDatasetFolders) {
    for (fs::recursive_directory_iterator it(dataset_ / top, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      if (auto stamp = stamp_of(it->path())) {
        out[it->path().lexically_relative(dataset_).generic_string()] = *stamp;
      }
    }
    ec.clear();
  }
  return out;
}

// Whether the files on disk are what the snapshot and the server's own writes account for. The
// time of a file the server appended to is taken from disk once its size matches.
bool ServeContext::matches_disk(const DiskState& disk) {
  if (disk.size() != expected_.size()) return false;
  auto e = expected_.begin();
  for (auto d = disk.begin(); d != disk.end(); ++d, ++e) {
    if (d->first != e->first || d->second.size != e->second.size) return false;
    if (!e->second.any_mtime && d->second.mtime != e->second.mtime) return false;
  }
  expected_ = disk;
  return true;
}

void ServeContext::note_own_append(const Trace& trace) {
  const auto set = traces();
  const Record<Solution>* s = trace.solution ? set->solution(*trace.solution) : nullptr;
  const Definition* d = set->definition(trace.definition);
  if (!s || !d) return;  // its file is not known: the watcher finds the change and reloads
  const std::string file =
      layout::traces_file(s->value.author, d->op_type, d->name).generic_string();
  const std::uintmax_t bytes = dump_json_line(to_json(trace)).size() + 1;
  std::lock_guard<std::mutex> lock(mu_);
  FileStamp& stamp = expected_[file];
  stamp.size += bytes;
  stamp.any_mtime = true;
  if (since_scan_) since_scan_->appends.emplace_back(file, bytes);
}

void ServeContext::add_own_traces(std::span<const Trace> traces) {
  if (traces.empty()) return;
  std::lock_guard<std::mutex> update(update_mu_);
  auto next = with_new_traces(this->traces(), traces);
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(next);
  if (since_scan_)
    since_scan_->traces.insert(since_scan_->traces.end(), traces.begin(), traces.end());
}

void ServeContext::add_own_solution(const Solution& solution, const fs::path& file) {
  std::lock_guard<std::mutex> update(update_mu_);
  const auto current = traces();
  if (current->solution(solution.name)) return;
  auto next = std::make_shared<TraceSet>(*current);
  next->add_solution(solution);
  const std::optional<FileStamp> stamp = stamp_of(file);
  const std::string rel = file.lexically_relative(dataset_).generic_string();
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(next);
  if (stamp) expected_[rel] = *stamp;
  if (since_scan_) {
    if (stamp) since_scan_->files.emplace_back(rel, *stamp);
    since_scan_->solutions.push_back(solution);
  }
}

void ServeContext::watch() {
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!wake_.wait_for(lock, kDiskCheckInterval, [this] { return stopping_; })) {
    lock.unlock();
    check_disk();
    lock.lock();
  }
}

// Runs on the watcher thread only: readers keep the current snapshot while the dataset loads.
void ServeContext::check_disk() {
  // A trace the server appends reaches the file (and its fdatasync) before note_own_append: a
  // difference must outlast that moment to count as a change.
  for (int look = 0;; ++look) {
    const DiskState disk = disk_state();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (matches_disk(disk)) return;
      if (look == 1) {
        since_scan_.emplace();  // the own writes from here on are applied to the load as well
        break;
      }
    }
    std::unique_lock<std::mutex> lock(watch_mu_);
    if (wake_.wait_for(lock, kSettleTime, [this] { return stopping_; })) return;
  }
  std::cerr << "fib serve: the dataset's files changed on disk; reloading it\n";
  DiskState scanned = disk_state();
  try {
    TraceSet loaded = TraceSet::load(dataset_);
    report_load_problems(loaded);
    publish_reload(std::move(loaded), std::move(scanned));
  } catch (const std::exception& e) {
    std::cerr << fmt::format("fib serve: reloading the dataset failed; keeping the last one: {}\n",
                             e.what());
    std::lock_guard<std::mutex> lock(mu_);
    expected_ = std::move(scanned);  // not again until the files change
    since_scan_.reset();
  }
}

void ServeContext::publish_reload(TraceSet loaded, DiskState scanned) {
  std::lock_guard<std::mutex> update(update_mu_);
  OwnWrites own;
  {
    std::lock_guard<std::mutex> lock(mu_);
    own = std::move(*since_scan_);
    since_scan_.reset();
  }
  for (const Solution& s : own.solutions) {
    if (!loaded.solution(s.name)) loaded.add_solution(s);
  }
  auto next = with_new_traces(std::make_shared<const TraceSet>(std::move(loaded)), own.traces);
  for (const auto& [file, bytes] : own.appends) {
    scanned[file].size += bytes;
    scanned[file].any_mtime = true;
  }
  for (const auto& [file, stamp] : own.files) scanned[file] = stamp;
  std::lock_guard<std::mutex> lock(mu_);
  snapshot_ = std::move(next);
  expected_ = std::move(scanned);
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
