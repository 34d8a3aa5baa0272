#include "builds_ahead.h"

#include <algorithm>

namespace fib::bench::detail {

BuildsAhead::BuildsAhead(std::vector<const Solution*> order, BuildOptions options, unsigned jobs)
    : options_(std::move(options)) {
  for (const Solution* s : order) {
    if (!entries_.emplace(s->name, Entry{s, false, {}, nullptr}).second) continue;
    queue_.push_back(s->name);
  }
  const std::size_t n = std::clamp<std::size_t>(jobs, 1, std::max<std::size_t>(1, queue_.size()));
  for (std::size_t i = 0; i < n && !queue_.empty(); ++i) threads_.emplace_back([this] { work(); });
}

BuildsAhead::~BuildsAhead() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& t : threads_) t.join();
}

bool BuildsAhead::scheduled(const std::string& solution) const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.count(solution) > 0;
}

void BuildsAhead::work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_ && next_ < queue_.size()) {
    Entry& e = entries_.at(queue_[next_++]);
    ++running_;
    lock.unlock();
    BuildResult result;
    std::exception_ptr error;
    try {
      result = build_solution(*e.solution, options_);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    e.result = std::move(result);
    e.error = error;
    e.done = true;
    --running_;
    changed_.notify_all();
  }
}

BuildResult BuildsAhead::take(const std::string& solution) {
  std::unique_lock<std::mutex> lock(mu_);
  Entry& e = entries_.at(solution);
  changed_.wait(lock, [&] { return e.done; });
  if (e.error) std::rethrow_exception(e.error);
  return e.result;
}

bool BuildsAhead::failed(const std::string& solution) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(solution);
  return it != entries_.end() && it->second.done && !it->second.error && !it->second.result.ok();
}

void BuildsAhead::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return running_ == 0 && (next_ >= queue_.size() || stopping_); });
}

}  // namespace fib::bench::detail
