// Which rank this process is, read from the launcher's environment (mpirun's and Slurm's
// variables), and which CUDA device `cuda:local` names.
#include "fib/distributed/launch.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "fib/base/diagnostics.h"

namespace fib::distributed {
namespace {

std::optional<Launch> detect(const std::map<std::string, std::string>& vars) {
  return detect_launch([&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(Launch, AloneWithoutLauncherVariables) { EXPECT_FALSE(detect({{"HOME", "/root"}})); }

TEST(Launch, OneRankIsAlone) { EXPECT_FALSE(detect({{"OMPI_COMM_WORLD_SIZE", "1"}})); }

TEST(Launch, OpenMpiVariables) {
  const auto l = detect({{"OMPI_COMM_WORLD_SIZE", "8"},
                         {"OMPI_COMM_WORLD_RANK", "5"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  ASSERT_TRUE(l);
  EXPECT_EQ(l->launcher, "mpirun");
  EXPECT_EQ(l->rank, 5);
  EXPECT_EQ(l->size, 8);
  EXPECT_EQ(l->local_rank, 1);
  EXPECT_EQ(l->local_size, 4);
}

TEST(Launch, SlurmTaskVariables) {
  const auto l = detect({{"SLURM_NTASKS", "16"},
                         {"SLURM_PROCID", "9"},
                         {"SLURM_LOCALID", "1"},
                         {"SLURM_TASKS_PER_NODE", "8(x2)"}});
  ASSERT_TRUE(l);
  EXPECT_EQ(l->launcher, "slurm");
  EXPECT_EQ(l->rank, 9);
  EXPECT_EQ(l->size, 16);
  EXPECT_EQ(l->local_rank, 1);
  EXPECT_EQ(l->local_size, 8);
}

TEST(Launch, SlurmUniformTasksPerNode) {
  const auto l = detect({{"SLURM_NTASKS", "4"},
                         {"SLURM_PROCID", "0"},
                         {"SLURM_LOCALID", "0"},
                         {"SLURM_NTASKS_PER_NODE", "2"}});
  ASSERT_TRUE(l);
  EXPECT_EQ(l->local_size, 2);
}

// sbatch sets SLURM_NTASKS for the batch script itself; only srun's tasks have SLURM_PROCID.
TEST(Launch, SlurmAllocationWithoutTaskIsAlone) {
  EXPECT_FALSE(detect({{"SLURM_NTASKS", "16"}, {"SLURM_JOB_ID", "42"}}));
}

TEST(Launch, MpirunInsideAnAllocationIsMpirun) {
  const auto l = detect({{"SLURM_NTASKS", "16"},
                         {"SLURM_PROCID", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "3"},
                         {"OMPI_COMM_WORLD_RANK", "2"}});
  ASSERT_TRUE(l);
  EXPECT_EQ(l->launcher, "mpirun");
  EXPECT_EQ(l->size, 3);
  EXPECT_EQ(l->rank, 2);
}

TEST(Launch, BadRankNumberNamesTheVariable) {
  try {
    detect({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "x1"}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_PROCID=x1"), std::string::npos) << e.what();
  }
}

TEST(Launch, RankBeyondSizeIsAnError) {
  EXPECT_THROW(detect({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "4"}}), Error);
}

TEST(Launch, LocalDevice) {
  EXPECT_EQ(local_device("cuda:local", 3), "cuda:3");
  EXPECT_EQ(local_device("cpu", 3), "cpu");
  EXPECT_EQ(local_device("cuda:0,cuda:1", 1), "cuda:0,cuda:1");
}

}  // namespace
}  // namespace fib::distributed
