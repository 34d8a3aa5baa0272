#include "inputs_ahead.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "fib/base/diagnostics.h"

namespace fib::bench::detail {

using Clock = std::chrono::steady_clock;

InputMaker::InputMaker(PrepareSettings settings, std::filesystem::path scratch,
                       const std::vector<WorkItem>& items, bool ahead)
    : settings_(settings), scratch_(std::move(scratch)), items_(items), ahead_enabled_(ahead) {}

InputMaker::~InputMaker() { wait_all(); }

void InputMaker::wait_all() {
  std::map<std::size_t, std::future<PreparedItem>> left;
  {
    // Not held while waiting: the items in the making take the lock to name their folders.
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(ahead_);
  }
  for (auto& [k, f] : left) f.wait();
}

PreparedItem InputMaker::make(std::size_t k, int max_threads) {
  std::filesystem::path dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dir = scratch_ / fmt::format("w{}", workload_index_++);
  }
  const WorkItem& item = items_[k];
  PreparedItem out;
  const auto t0 = Clock::now();
  try {
    out.workload =
        prepare_workload(settings_, *item.def, item.workload->workload, dir, max_threads);
  } catch (const Error& e) {
    out.error = e.what();
  }
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

void InputMaker::prepare_ahead(std::size_t k) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ahead_enabled_ || k >= items_.size() || ahead_.count(k)) return;
  // Up to half the host's cores (a workload's checked sets are made one per thread, so three
  // trials use three), at the lowest priority (threads it starts inherit it): the lanes'
  // workers launch and check calls meanwhile and must not wait for a core. Items made ahead
  // are made one after another (each waits for the one before): never more than that at once.
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  auto done = std::make_shared<std::promise<void>>();
  std::shared_future<void> before = ahead_last_;
  ahead_last_ = done->get_future().share();
  ahead_.emplace(k, std::async(std::launch::async, [this, k, threads, before, done] {
                   struct Finish {
                     std::promise<void>& p;
                     ~Finish() { p.set_value(); }
                   } finish{*done};
                   (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
                   if (before.valid()) before.wait();
                   return make(k, threads);
                 }));
}

InputMaker::Taken InputMaker::take(std::size_t k) {
  std::future<PreparedItem> made_ahead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = ahead_.find(k); it != ahead_.end()) {
      made_ahead = std::move(it->second);
      ahead_.erase(it);
    }
  }
  Taken taken;
  taken.was_ready = made_ahead.valid() &&
                    made_ahead.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  taken.item = made_ahead.valid() ? made_ahead.get()
                                  : make(k, static_cast<int>(std::thread::hardware_concurrency()));
  return taken;
}

void InputMaker::discard(std::size_t k) {
  std::future<PreparedItem> made_ahead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = ahead_.find(k); it != ahead_.end()) {
      made_ahead = std::move(it->second);
      ahead_.erase(it);
    }
  }
  if (!made_ahead.valid()) return;
  const PreparedItem item = made_ahead.get();
  std::error_code ec;
  if (item.workload) std::filesystem::remove_all(item.workload->dir, ec);
}

}  // namespace fib::bench::detail
