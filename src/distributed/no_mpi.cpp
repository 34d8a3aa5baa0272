// This fib was built without MPI: `fib run` under mpirun or srun says how to get it.
#include "fib/base/diagnostics.h"
#include "fib/distributed/launch.h"

namespace fib::distributed {

bool have_mpi() { return false; }

std::unique_ptr<MpiLink> open_mpi() {
  throw Error("fib run", "this fib was built without MPI, so it cannot run as one of many ranks",
              "install Open MPI (Debian: apt-get install libopenmpi-dev openmpi-bin, or "
              "scripts/install-deps.sh) and build fib again; docs/mpi.md");
}

}  // namespace fib::distributed
