// A worker's whole process tree, stopped while it waits and continued when it works again: the
// persistent worker of one solution stays alive between that solution's evaluations, and nothing
// it left running (a thread, a child, a setsid'd grandchild in its sandbox) may run while another
// solution's worker is timed or its outputs are read.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace fib::bench {

// `root` and every process descending from it (/proc/<pid>/task/<tid>/children), by pid.
// A sandboxed worker's processes all descend from the bubblewrap process fib started: an
// orphan in its pid namespace is adopted by bubblewrap's init there.
std::vector<pid_t> process_tree(pid_t root);

// Stops every process of `root`'s tree (SIGSTOP), walking it again until no process is left
// running that could still fork: a stopped process starts none. Returns how many it stopped.
std::size_t stop_process_tree(pid_t root);

// Continues every process of `root`'s tree (SIGCONT).
void continue_process_tree(pid_t root);

// The resident memory of `root`'s tree: the sum of its processes' resident pages (pages they
// share counted in each, so an upper bound).
std::uint64_t resident_bytes(pid_t root);

}  // namespace fib::bench
