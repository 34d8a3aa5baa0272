// `fib run` spread over ranks (docs/mpi.md): rank 0 plans the run, hands out work items one at a
// time, largest first, and signs and appends every trace; the other ranks evaluate. The ranks
// talk through a RankLink (MPI in src/distributed), always from the thread that calls these.
#pragma once

#include <optional>
#include <string>

#include "fib/bench/run/run.h"

namespace fib::bench {

// Messages between rank 0 and the others; payloads are JSON text.
enum class RankTag : int { kReady = 1, kItem = 2, kResult = 3, kHeartbeat = 4, kStop = 5 };

struct RankMessage {
  int source = 0;
  RankTag tag = RankTag::kReady;
  std::string payload;
};

class RankLink {
 public:
  virtual ~RankLink() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void send(int to, RankTag tag, const std::string& payload) = 0;
  // A message that has arrived, without waiting; nothing when none has.
  virtual std::optional<RankMessage> poll() = 0;
};

struct RankSettings {
  // A rank not heard from (its heartbeats come every heartbeat_seconds) for this long is lost:
  // its item in flight goes to another rank.
  double lost_after_seconds = 60;
  double heartbeat_seconds = 2;
  std::string host;  // this rank's host name, for rank 0's messages
};

// Rank 0. Returns the run's result as run_benchmark would, with every trace the ranks made;
// `all_ranks_alive` says whether every rank answered to the end (MPI_Finalize would wait on a
// lost one). Throws fib::Error when every evaluating rank is lost before the work is done.
RunResult run_coordinator(const RunOptions& options, const RunCallbacks& callbacks, RankLink& link,
                          const RankSettings& settings, bool* all_ranks_alive);

// Every other rank: evaluates what rank 0 hands out on `options.device` until told to stop.
// Returns whether rank 0 asked for a clean MPI_Finalize.
bool run_rank_worker(const RunOptions& options, RankLink& link, const RankSettings& settings);

}  // namespace fib::bench
