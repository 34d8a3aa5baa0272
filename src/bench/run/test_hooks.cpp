// The test builds' switches (fib/bench/run/test_hooks.h); fixed at their defaults elsewhere.
#include "fib/bench/run/test_hooks.h"

#ifdef FIB_TEST_HOOKS
#include <atomic>
#endif

namespace fib::bench::test_hooks {

namespace {
PenSwitches g_pen;
}  // namespace

const PenSwitches& pen() { return g_pen; }

#ifdef FIB_TEST_HOOKS

namespace {
std::atomic<bool> g_shared_workers{false};
}  // namespace

void set_pen(const PenSwitches& switches) { g_pen = switches; }
void share_solution_workers(bool on) { g_shared_workers = on; }
bool solution_workers_shared() { return g_shared_workers; }

#endif

}  // namespace fib::bench::test_hooks
