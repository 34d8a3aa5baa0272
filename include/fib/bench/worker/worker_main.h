// The worker's side of a worker process: what `fib worker` runs. The orchestrator's side (spawn,
// channel, deadlines) is fib/bench/launch/worker_process.h.
#pragma once

namespace fib::bench {

// The `fib worker` entry point (the child side): serves requests on `channel_fd` until asked
// to exit or the channel closes. Returns the process exit code.
int worker_main(int channel_fd);

}  // namespace fib::bench
