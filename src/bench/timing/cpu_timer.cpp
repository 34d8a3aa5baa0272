// The CPU worker's timer, as traces describe it: the schedule loop (bench/worker/worker_main.cpp)
// reads steady_clock around each call, and the cache flush (cache_flush.cpp) evicts the call's
// memory before it.
#include "fib/bench/timing/timing.h"

namespace fib::bench {

std::string cpu_timer_description() {
  return "steady_clock around each call (CLOCK_MONOTONIC); inputs and outputs evicted from the "
         "caches (clflushopt) before every call";
}

}  // namespace fib::bench
