// Stopping and continuing a worker's process tree (fib/bench/launch/process_tree.h).
#include "fib/bench/launch/process_tree.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace fib::bench {

namespace {

// The children of every thread of `pid` (a thread that forked is their parent).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> kids;
  std::error_code ec;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream in(task.path() / "children");
    for (pid_t child; in >> child;) kids.push_back(child);
  }
  return kids;
}

}  // namespace

std::vector<pid_t> process_tree(pid_t root) {
  std::vector<pid_t> tree;
  if (root <= 0) return tree;
  std::set<pid_t> seen;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    if (!seen.insert(p).second) continue;
    tree.push_back(p);
    for (pid_t c : children_of(p)) todo.push_back(c);
  }
  return tree;
}

std::size_t stop_process_tree(pid_t root) {
  std::set<pid_t> stopped;
  // A process may fork between the walk and its stop; its child shows in the next walk. Stopped
  // processes fork no more, so the walks end (bounded all the same).
  for (int pass = 0; pass < 64; ++pass) {
    bool added = false;
    for (pid_t p : process_tree(root)) {
      if (stopped.insert(p).second) {
        ::kill(p, SIGSTOP);
        added = true;
      }
    }
    if (!added) break;
  }
  return stopped.size();
}

void continue_process_tree(pid_t root) {
  for (pid_t p : process_tree(root)) ::kill(p, SIGCONT);
}

std::uint64_t resident_bytes(pid_t root) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t total = 0;
  for (pid_t p : process_tree(root)) {
    std::ifstream statm("/proc/" + std::to_string(p) + "/statm");
    std::uint64_t size = 0, resident = 0;
    if (statm >> size >> resident) total += resident * page;
  }
  return total;
}

}  // namespace fib::bench
