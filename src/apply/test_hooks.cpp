#include "fib/apply/test_hooks.h"

#include <atomic>

namespace fib::apply::test_hooks {

namespace {
std::atomic<bool> g_digest_check{true};
}  // namespace

bool digest_check() { return g_digest_check.load(); }

#ifdef FIB_TEST_HOOKS
void set_digest_check(bool on) { g_digest_check.store(on); }
#endif

}  // namespace fib::apply::test_hooks
