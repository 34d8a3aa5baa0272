// Test builds' switches (fib/bench/run/test_hooks.h); empty elsewhere.
#include "fib/bench/run/test_hooks.h"

#ifdef FIB_TEST_HOOKS

#include <atomic>

namespace fib::bench::test_hooks {

namespace {
std::atomic<bool> g_shared_workers{false};
}  // namespace

void share_solution_workers(bool on) { g_shared_workers = on; }
bool solution_workers_shared() { return g_shared_workers; }

}  // namespace fib::bench::test_hooks

#endif
