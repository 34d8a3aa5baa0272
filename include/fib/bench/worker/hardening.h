// Defence in depth inside a worker, installed before any solution code is loaded: a seccomp-bpf
// filter (the syscalls a harness patcher needs: ptrace, process_vm_*, userfaultfd, io_uring,
// namespaces, ...; replacing the worker's channel), Landlock (no file writes outside the
// folders the worker is given, which closes /proc/self/mem) and mseal of the code and
// relocation tables of everything the worker has loaded. All of it is inherited by whatever the
// solution forks or execs. docs/run.md ("Isolation") says what each measure closes.
#pragma once

#include <string>
#include <vector>

#include "fib/trace/json_reader.h"

namespace fib::bench {

struct WorkerHardening {
  bool seccomp = true;
  bool landlock = true;
  bool mseal = true;
  // Where the worker and its solutions may write (the box's out/ folder, private temp folders,
  // device nodes); everything else is read-only to them under Landlock.
  std::vector<std::string> writable;
  // The worker's channel to the orchestrator: the filter keeps it from being replaced (dup2
  // over it, or closed so that another descriptor takes its number).
  int channel_fd = -1;
};

// Installs every measure `h` asks for that this kernel has. Returns the record the worker sends
// in its greeting (environment.extra.isolation.hardening): per measure "on" with what it covers,
// or "off" and why.
Json install_worker_hardening(const WorkerHardening& h);

// The syscalls the filter denies outright (each with EPERM, or ENOSYS for clone3), by name.
std::vector<std::string> denied_syscalls();

}  // namespace fib::bench
