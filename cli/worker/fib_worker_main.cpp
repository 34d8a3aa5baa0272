// fib-worker: the worker process alone (`fib-worker worker --channel N [--writable PATH]...`, the
// arguments of `fib worker`), linked without a symbol table so that a solution finding its way
// around the worker's code has only the dynamic imports to go by. Test builds also make
// fib-worker-unhardened from this file, with FIB_WORKER_UNHARDENED: the same worker with every
// measure of fib/bench/worker/hardening.h left off, which the red-team tests show the attacks
// working against; release builds have no way to turn a measure off.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fib/bench/worker/worker_main.h"

namespace {

int usage() {
  std::fputs("usage: fib-worker worker --channel FD [--writable PATH]... (started by fib run)\n",
             stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) != "worker" || std::string(argv[2]) != "--channel") {
    return usage();
  }
  char* end = nullptr;
  const long fd = std::strtol(argv[3], &end, 10);
  if (end == argv[3] || *end != '\0' || fd < 0) return usage();
  fib::bench::WorkerHardening hardening;
  for (int i = 4; i < argc; i += 2) {
    if (std::string(argv[i]) != "--writable" || i + 1 >= argc) return usage();
    hardening.writable.emplace_back(argv[i + 1]);
  }
#ifdef FIB_WORKER_UNHARDENED
  hardening.seccomp = hardening.landlock = hardening.mseal = false;
#endif
  return fib::bench::worker_main(static_cast<int>(fd), hardening);
}
