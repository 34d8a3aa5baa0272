// A switch only test builds (FIB_TEST_HOOKS) can set: it turns the solution digest check off, so
// a red-team test can show a tampered solution being chosen without it. Nothing in fib sets it;
// no flag, configuration or variable reaches it.
#pragma once

namespace fib::apply::test_hooks {

// Whether build_table holds each trace's signed solution digest against the dataset's record:
// in a build without FIB_TEST_HOOKS, always.
bool digest_check();

#ifdef FIB_TEST_HOOKS
void set_digest_check(bool on);
#endif

}  // namespace fib::apply::test_hooks
