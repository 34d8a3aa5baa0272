#include "fib/distributed/launch.h"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

#include "fib/base/diagnostics.h"

namespace fib::distributed {

namespace {

std::optional<int> number(const std::function<const char*(const char*)>& env, const char* name) {
  const char* v = env(name);
  if (!v || !*v) return std::nullopt;
  int n = 0;
  const std::string_view s(v);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < 0) {
    throw Error(name, fmt::format("the launcher set {}={}, which is no rank number", name, v),
                "launch fib with mpirun or srun, which set it");
  }
  return n;
}

// Slurm's tasks on this node: SLURM_NTASKS_PER_NODE when uniform, else the first count of
// SLURM_TASKS_PER_NODE ("4(x2),3"), else 1.
int slurm_local_size(const std::function<const char*(const char*)>& env) {
  if (auto n = number(env, "SLURM_NTASKS_PER_NODE")) return *n;
  const char* per = env("SLURM_TASKS_PER_NODE");
  if (!per) return 1;
  int n = 0;
  std::from_chars(per, per + std::string_view(per).size(), n);
  return n > 0 ? n : 1;
}

}  // namespace

std::optional<Launch> detect_launch(const std::function<const char*(const char*)>& env) {
  Launch l;
  if (auto size = number(env, "OMPI_COMM_WORLD_SIZE")) {
    l.launcher = "mpirun";
    l.size = *size;
    l.rank = number(env, "OMPI_COMM_WORLD_RANK").value_or(0);
    l.local_rank = number(env, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(0);
    l.local_size = number(env, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(1);
  } else if (auto ntasks = number(env, "SLURM_NTASKS")) {
    if (!env("SLURM_PROCID")) return std::nullopt;  // in an allocation, not a task of srun
    l.launcher = "slurm";
    l.size = *ntasks;
    l.rank = number(env, "SLURM_PROCID").value_or(0);
    l.local_rank = number(env, "SLURM_LOCALID").value_or(0);
    l.local_size = slurm_local_size(env);
  } else if (auto pmix_size = number(env, "PMIX_SIZE")) {
    l.launcher = "pmix";
    l.size = *pmix_size;
    l.rank = number(env, "PMIX_RANK").value_or(0);
  } else {
    return std::nullopt;
  }
  if (l.size <= 1) return std::nullopt;
  if (l.rank >= l.size) {
    throw Error("rank", fmt::format("{} says rank {} of {}", l.launcher, l.rank, l.size),
                "the launcher's environment is inconsistent");
  }
  return l;
}

std::string local_device(const std::string& device, int local_index) {
  if (device != "cuda:local") return device;
  return fmt::format("cuda:{}", local_index);
}

}  // namespace fib::distributed
