// The worker's side of a worker process: what `fib worker` runs. The orchestrator's side (spawn,
// channel, deadlines) is fib/bench/launch/worker_process.h.
#pragma once

#include "fib/bench/worker/hardening.h"

namespace fib::bench {

// The `fib worker` entry point (the child side): locks itself down as `hardening` says (every
// measure on outside test builds), then serves requests on `channel_fd` until asked to exit or
// the channel closes. Returns the process exit code.
int worker_main(int channel_fd, WorkerHardening hardening);

}  // namespace fib::bench
