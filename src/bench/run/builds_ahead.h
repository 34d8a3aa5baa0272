// Building a run's solutions ahead of the lanes, on several host cores at once: a run of new
// candidates is mostly builds (nvcc, g++, torch's extension builder), and a lane that builds
// each solution when it first meets it leaves the device idle and every other core too. The
// pool builds each (solution, architecture set) once, in the order the lanes will need them;
// a lane waits only for the build of the solution it is about to run.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fib/bench/builder/build.h"
#include "fib/trace/solution.h"

namespace fib::bench::detail {

class BuildsAhead {
 public:
  // Builds every solution of `order` (first needed first, each once) with `options`, on `jobs`
  // threads (at least one).
  BuildsAhead(std::vector<const Solution*> order, BuildOptions options, unsigned jobs);
  ~BuildsAhead();  // waits for the builds in progress; the queued ones are dropped
  BuildsAhead(const BuildsAhead&) = delete;
  BuildsAhead& operator=(const BuildsAhead&) = delete;

  // Whether the pool builds `solution` (by name).
  bool scheduled(const std::string& solution) const;
  // The solution's build, waiting for it; rethrows what its build threw.
  BuildResult take(const std::string& solution);
  // Whether the solution's build is done and failed (never waits).
  bool failed(const std::string& solution) const;
  // Waits until no build is running or queued (a CPU lane times nothing beside a compiler).
  void wait_idle();

  unsigned jobs() const { return static_cast<unsigned>(threads_.size()); }

 private:
  void work();

  struct Entry {
    const Solution* solution = nullptr;
    bool done = false;
    BuildResult result;
    std::exception_ptr error;
  };

  const BuildOptions options_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Entry> entries_;  // by solution name
  std::vector<std::string> queue_;        // names, in build order
  std::size_t next_ = 0;                  // the next of queue_ to build
  std::size_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace fib::bench::detail
