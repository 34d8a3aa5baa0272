// How this process was launched: as one rank of many (mpirun, srun) or alone. Read from the
// launcher's environment before MPI is touched, so that a plain `fib run` never starts MPI.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "fib/bench/run/ranks.h"

namespace fib::distributed {

struct Launch {
  std::string launcher;  // "mpirun" (Open MPI's OMPI_COMM_WORLD_*), "slurm" (SLURM_*), "pmix"
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // on this host
};

// Nothing when the environment names no launcher or a single rank. `env` reads a variable
// (nullptr: unset). Open MPI's variables win over Slurm's: mpirun inside an allocation sets both.
std::optional<Launch> detect_launch(const std::function<const char*(const char*)>& env);

// "cuda:local" becomes the CUDA device of this rank's index among the evaluating ranks of its
// host; anything else is returned as it is.
std::string local_device(const std::string& device, int local_index);

// Whether this fib was built with MPI.
bool have_mpi();

// The MPI link (MPI_Init on construction, MPI_Finalize on finalize()); throws fib::Error
// without MPI. `local_index`: this rank's index among the evaluating ranks (all but world rank
// 0) on its host.
class MpiLink : public bench::RankLink {
 public:
  virtual int local_index() const = 0;
  virtual void finalize() = 0;
};
std::unique_ptr<MpiLink> open_mpi();

}  // namespace fib::distributed
