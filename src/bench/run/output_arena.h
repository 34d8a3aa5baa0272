// The orchestrator's side of a CPU evaluation's output arena (protocol::OutputArena): a sealed
// memfd, one slot per timed call, made here, passed to the solution worker with its request
// (Worker::call), and read here once the worker's process tree is stopped (Worker::stop_tree),
// into the orchestrator's own memory. The worker cannot grow or shrink it (F_SEAL_GROW,
// F_SEAL_SHRINK), so a read never faults; the orchestrator reads it with pread, never through a
// mapping the worker could change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fib/bench/protocol/messages.h"
#include "fib/tensor/tensor.h"

namespace fib::bench::detail {

// One trial's timed calls may leave this much output in the arena; a trial whose calls would
// leave more makes fewer timed calls (plan_output_arena), so every timed call keeps its outputs.
inline constexpr std::uint64_t kArenaTrialBudget = std::uint64_t{256} << 20;

// The arena for `schedule`'s trials on a definition whose outputs have `shapes`: the layout, and
// the schedule with each trial's first slot and poison indices (from `poison_seed`), its timed
// calls cut to the budget.
struct PlannedArena {
  protocol::OutputArena layout;
  protocol::Schedule schedule;
};
PlannedArena plan_output_arena(const Definition& def, const std::vector<Shape>& shapes,
                               protocol::Schedule schedule, std::uint64_t poison_seed);

// A uniform draw in [0, n) (n > 0) from the orchestrator's own random source (getrandom): the
// position of a trial's checked call among the timed calls it made.
std::uint64_t draw_checked_position(std::uint64_t n);

// Single protections of the checked call turned off, for the red-team tests that show each
// attack working without its protection (tests/bench/pen_red_team_test.cpp). Only tests set
// them: nothing in fib's command line, configuration or environment reaches them. Every
// protection is on by default.
struct PenSwitchesForTests {
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
PenSwitchesForTests& pen_switches_for_tests();

class OutputArenaFile {
 public:
  // Makes the memfd for `layout` (zero-filled, sealed against resizing); throws fib::Error.
  explicit OutputArenaFile(const protocol::OutputArena& layout);
  ~OutputArenaFile();
  OutputArenaFile(const OutputArenaFile&) = delete;
  OutputArenaFile& operator=(const OutputArenaFile&) = delete;
  int fd() const { return fd_; }
  std::uint64_t bytes() const { return layout_.bytes; }
  // Output o of slot `slot` as `def` shapes it (`shapes[o]`), copied into a tensor of its own.
  std::vector<std::pair<std::string, Tensor>> read_slot(const Definition& def,
                                                        const std::vector<Shape>& shapes,
                                                        std::uint64_t slot) const;

 private:
  protocol::OutputArena layout_;
  int fd_ = -1;
};

}  // namespace fib::bench::detail
