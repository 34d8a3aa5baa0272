// A parked worker's process tree is stopped as a whole and continued as a whole
// (fib/bench/launch/process_tree.h): here a shell whose child and grandchild (in a session of
// its own, as a solution's setsid'd helper would be) all stop and go on again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "fib/bench/launch/process_tree.h"

namespace fib::bench {
namespace {

// The state letter of /proc/<pid>/stat: 'T' stopped, 'S' sleeping, ...
char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

// Whether SIGSTOP waits in the process's shared pending set (ShdPnd of /proc/<pid>/status): a
// process in uninterruptible sleep ('D', e.g. paging in its program on a loaded machine) takes
// the stop only when it wakes, which on a busy machine may be seconds later.
bool stop_pending(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("ShdPnd:", 0) == 0) {
      const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
      return (mask >> (SIGSTOP - 1)) & 1ULL;
    }
  }
  return false;
}

// Stopped, or certain to stop once out of uninterruptible sleep.
bool stopped_or_stopping(pid_t pid) {
  const char s = state_of(pid);
  return s == 'T' || (s == 'D' && stop_pending(pid));
}

TEST(ProcessTree, EveryDescendantStopsAndContinues) {
  const pid_t root = ::fork();
  ASSERT_GE(root, 0);
  if (root == 0) {
    ::execl("/bin/sh", "sh", "-c", "setsid sh -c 'sleep 30' & sleep 30 & wait", nullptr);
    ::_exit(127);
  }
  std::vector<pid_t> tree;
  for (int i = 0; i < 200 && tree.size() < 4; ++i) {  // sh, sleep, setsid's sh, its sleep
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    tree = process_tree(root);
  }
  ASSERT_GE(tree.size(), 4u);
  EXPECT_EQ(tree.front(), root);
  EXPECT_EQ(stop_process_tree(root), tree.size());
  for (pid_t p : tree) {
    bool stopping = false;
    for (int i = 0; i < 1000 && !(stopping = stopped_or_stopping(p)); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(stopping) << p << " is in state " << state_of(p);
  }
  continue_process_tree(root);
  for (pid_t p : tree) {
    char s = '?';
    for (int i = 0; i < 1000 && ((s = state_of(p)) == 'T' || stop_pending(p)); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_NE(s, 'T') << p;
    EXPECT_FALSE(stop_pending(p)) << p;
  }
  for (pid_t p : process_tree(root)) ::kill(p, SIGKILL);
  int status = 0;
  ::waitpid(root, &status, 0);
}

}  // namespace
}  // namespace fib::bench
