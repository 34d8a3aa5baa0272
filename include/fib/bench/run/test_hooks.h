// Switches that exist only in test builds (FIB_TEST_HOOKS, defined where the tests are built):
// each turns one protection off, so a red-team test can show its attack working without it.
// Nothing in fib calls them; no flag or variable reaches them.
#pragma once

#ifdef FIB_TEST_HOOKS

namespace fib::bench::test_hooks {

// On: a lane's solutions share one persistent worker again (interpreter, torch and address space
// included), as before each solution got a worker of its own. Off by default.
void share_solution_workers(bool on);
bool solution_workers_shared();

}  // namespace fib::bench::test_hooks

#endif
