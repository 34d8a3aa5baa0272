// Switches that only test builds (FIB_TEST_HOOKS, defined where the tests are built) can set:
// each turns one protection off, so a red-team test can show its attack working without it.
// Nothing in fib sets them; no flag, configuration or variable reaches them.
#pragma once

namespace fib::bench::test_hooks {

// Single protections of the checked call turned off (tests/bench/pen_red_team_test.cpp). Every
// protection is on by default.
struct PenSwitches {
  // CPU lanes: the solution worker draws the checked call itself and writes its outputs to a
  // file in its box's out/, read after the reply (the GPU lanes' way), instead of the arena.
  bool worker_draws_checked_calls = false;
  // Take the outputs out of the box without holding them to a regular file with one link:
  // follow a link, as reading a path does.
  bool follow_links_out_of_the_box = false;
  // Make the boxes in the scratch folder (whose path a worker then sees in its mountinfo) and
  // bind each at its real path in the sandbox.
  bool box_at_its_real_path = false;
  // Read the drawn call's outputs from the arena without stopping the worker's tree, this
  // long after the reply (the time a judgement may take to come to them).
  bool read_without_stopping = false;
  int read_delay_ms = 0;
  // Leave the CPU-time check out of the verdict: it also catches an attacker whose thread polls
  // out/ or the arena, and a test of the pen shows what the pen alone closes.
  bool cpu_check_off = false;
};

// The pen's switches in force: in a build without FIB_TEST_HOOKS, always every protection on.
const PenSwitches& pen();

#ifdef FIB_TEST_HOOKS

// Sets the pen's switches until the next call (PenSwitches{} puts every protection back).
void set_pen(const PenSwitches& switches);

// On: a lane's solutions share one persistent worker again (interpreter, torch and address space
// included), as before each solution got a worker of its own. Off by default.
void share_solution_workers(bool on);
bool solution_workers_shared();

#endif

}  // namespace fib::bench::test_hooks
