// Stopping a worker's whole process tree before the orchestrator looks at what it left
// (Worker::stop_tree, fib/bench/launch/worker_process.h). SIGSTOP cannot be caught or ignored;
// the tree is walked through /proc/<pid>/task/<tid>/children (or, where the kernel lacks those
// files, every process's parent in /proc), and the stop is believed only once two walks in a
// row find the same processes, every thread stopped (or gone), and no thread's CPU time moved
// in between: a thread that resumed another, or was resumed, would have run.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "fib/bench/launch/process_tree.h"
#include "fib/bench/launch/worker_process.h"

namespace fib::bench {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<pid_t> numeric_entries(const std::string& dir) {
  std::vector<pid_t> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long v = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && v > 0) out.push_back(static_cast<pid_t>(v));
  }
  ::closedir(d);
  return out;
}

// The state letter and parent of /proc/<path>/stat ("pid (comm) S ppid ..."); comm may hold
// spaces and parentheses, so the fields are read after its last ')'.
// A small /proc file's text (empty when it cannot be read).
std::string read_small(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[4096];
  std::string text;
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

bool read_stat(const std::string& path, char* state, pid_t* ppid) {
  const std::string text = read_small(path);
  const auto close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(text.substr(close + 1));
  long parent = 0;
  if (!(rest >> *state >> parent)) return false;
  *ppid = static_cast<pid_t>(parent);
  return true;
}

// A thread's CPU time so far (schedstat's first field, ns), or its context switches where the
// kernel has no schedstat: either moves whenever the thread runs.
std::string run_mark(const std::string& task) {
  const std::string schedstat = read_small(task + "/schedstat");
  if (!schedstat.empty()) return schedstat;
  std::istringstream status(read_small(task + "/status"));
  std::string text, l;
  while (std::getline(status, l)) {
    if (l.find("ctxt_switches") != std::string::npos) text += l;
  }
  return text;
}

bool children_files_exist(pid_t root) {
  return ::access(fmt::format("/proc/{}/task/{}/children", root, root).c_str(), R_OK) == 0;
}

// Every process descending from `root` (itself included) as /proc shows them now.
std::set<pid_t> tree_of(pid_t root) {
  std::set<pid_t> tree{root};
  if (children_files_exist(root)) {
    std::vector<pid_t> todo{root};
    while (!todo.empty()) {
      const pid_t p = todo.back();
      todo.pop_back();
      for (pid_t t : numeric_entries(fmt::format("/proc/{}/task", p))) {
        std::istringstream f(read_small(fmt::format("/proc/{}/task/{}/children", p, t)));
        long c;
        while (f >> c) {
          if (tree.insert(static_cast<pid_t>(c)).second) todo.push_back(static_cast<pid_t>(c));
        }
      }
    }
    return tree;
  }
  std::map<pid_t, pid_t> parent;
  for (pid_t p : numeric_entries("/proc")) {
    char state;
    pid_t pp;
    if (read_stat(fmt::format("/proc/{}/stat", p), &state, &pp)) parent[p] = pp;
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [p, pp] : parent) {
      if (tree.contains(pp) && tree.insert(p).second) grew = true;
    }
  }
  return tree;
}

// What one look at the tree saw: its processes, each thread's run mark, and the processes with
// a thread not stopped.
struct TreeLook {
  std::set<pid_t> processes;
  std::map<std::string, std::string> marks;
  std::vector<pid_t> running;
};

bool stopped_or_gone(char state) {
  return state == 'T' || state == 't' || state == 'Z' || state == 'X' || state == 'x';
}

TreeLook look_at(pid_t root) {
  TreeLook look;
  look.processes = tree_of(root);
  for (pid_t p : look.processes) {
    for (pid_t t : numeric_entries(fmt::format("/proc/{}/task", p))) {
      const std::string task = fmt::format("/proc/{}/task/{}", p, t);
      char state = '?';
      pid_t pp = 0;
      const bool read = read_stat(task + "/stat", &state, &pp);
      if (read && !stopped_or_gone(state)) {
        look.running.push_back(p);
        break;
      }
      look.marks[task] = run_mark(task);
    }
  }
  return look;
}

}  // namespace

std::string Worker::stop_tree(std::chrono::milliseconds limit) {
  if (pid_ <= 0) return "the worker is not running";
  const auto deadline = Clock::now() + limit;
  ::kill(-pid_, SIGSTOP);  // its process group first: what it spawned unsandboxed, at once
  std::optional<TreeLook> before;
  while (Clock::now() < deadline) {
    TreeLook look = look_at(pid_);
    for (pid_t p : look.processes) {
      if (std::find(stopped_.begin(), stopped_.end(), p) == stopped_.end()) stopped_.push_back(p);
    }
    if (!look.running.empty()) {
      for (pid_t p : look.running) ::kill(p, SIGSTOP);
      before.reset();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    if (before && before->processes == look.processes && before->marks == look.marks) return {};
    before = std::move(look);
  }
  return fmt::format("the worker's processes did not all stop within {} ms", limit.count());
}

void Worker::resume_tree() {
  for (pid_t p : stopped_) ::kill(p, SIGCONT);
  if (pid_ > 0) ::kill(-pid_, SIGCONT);
  stopped_.clear();
}

std::vector<pid_t> process_tree(pid_t root) {
  if (root <= 0) return {};
  const std::set<pid_t> tree = tree_of(root);
  return {tree.begin(), tree.end()};
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
    std::istringstream statm(read_small(fmt::format("/proc/{}/statm", p)));
    std::uint64_t size = 0, resident = 0;
    if (statm >> size >> resident) total += resident * page;
  }
  return total;
}

}  // namespace fib::bench
