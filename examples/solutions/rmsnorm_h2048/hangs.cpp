// hangs: an RMSNorm of rmsnorm_h2048 that spins forever waiting for a flag nobody sets.
//
// Broken on purpose (a deadlock in miniature). The flag is volatile, so the loop is not
// undefined behaviour and the compiler keeps it; the call never returns and keeps one core busy.
// fib must kill the worker at its time limit and go on with the next solution.
//
// Expected from `fib run`: TIMEOUT on every workload.
#include <cstdint>

#include "fib/solution.h"

namespace {

volatile bool g_ready = false;  // set by "another thread" that does not exist

void rmsnorm(fib::TensorView hidden_states, fib::TensorView weight, fib::TensorView output) {
  (void)hidden_states;
  (void)weight;
  (void)output;
  while (!g_ready) {
  }
}

}  // namespace

FIB_EXPORT_SOLUTION(run, rmsnorm);
