// The ranks' link over MPI. Every call comes from the thread that made the link (MPI is
// initialized with MPI_THREAD_FUNNELED). Errors return instead of aborting, so that a lost peer
// is found by its silence (ranks.h) where mpirun lets the job go on (--enable-recovery).
#include <mpi.h>

#include <fmt/format.h>

#include "fib/base/diagnostics.h"
#include "fib/distributed/launch.h"

namespace fib::distributed {

namespace {

class Link final : public MpiLink {
 public:
  Link() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // This host's ranks; world rank 0 coordinates and takes no device.
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    int local_rank = 0, has_zero = rank_ == 0 ? 1 : 0, zero_here = 0;
    MPI_Comm_rank(local, &local_rank);
    MPI_Allreduce(&has_zero, &zero_here, 1, MPI_INT, MPI_MAX, local);
    MPI_Comm_free(&local);
    local_index_ = local_rank - zero_here;
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_index() const override { return local_index_; }
  void send(int to, bench::RankTag tag, const std::string& payload) override {
    const int rc = MPI_Send(payload.data(), static_cast<int>(payload.size()), MPI_CHAR, to,
                            static_cast<int>(tag), MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
      throw Error(fmt::format("rank {}", to), fmt::format("MPI_Send failed ({})", rc));
    }
  }
  std::optional<bench::RankMessage> poll() override {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS ||
        !flag) {
      return std::nullopt;
    }
    int count = 0;
    MPI_Get_count(&st, MPI_CHAR, &count);
    bench::RankMessage m;
    m.source = st.MPI_SOURCE;
    m.tag = static_cast<bench::RankTag>(st.MPI_TAG);
    m.payload.resize(static_cast<std::size_t>(count));
    MPI_Recv(m.payload.data(), count, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    return m;
  }
  void finalize() override { MPI_Finalize(); }

 private:
  int rank_ = 0, size_ = 1, local_index_ = 0;
};

}  // namespace

bool have_mpi() { return true; }

std::unique_ptr<MpiLink> open_mpi() { return std::make_unique<Link>(); }

}  // namespace fib::distributed
