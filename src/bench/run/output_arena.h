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
