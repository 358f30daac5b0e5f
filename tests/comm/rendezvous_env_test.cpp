// Launch detection and rendezvous options from the environment (engine/distributed/launch/rendezvous.h): which
// launcher's variables win, what a malformed value says, which method an unset ZT_RENDEZVOUS picks;
// and the file and TCP methods between two threads of this process. Each test starts from an
// environment with every launcher variable removed.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>

#include "engine/base/core/check.h"
#include "engine/distributed/launch/rendezvous.h"

namespace zt {
namespace {

class RendezvousEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"ZT_RANK",
                             "ZT_WORLD_SIZE",
                             "ZT_LOCAL_RANK",
                             "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE",
                             "OMPI_COMM_WORLD_LOCAL_RANK",
                             "SLURM_PROCID",
                             "SLURM_NTASKS",
                             "SLURM_LOCALID",
                             "PMI_RANK",
                             "PMI_SIZE",
                             "MPI_LOCALRANKID",
                             "PMIX_RANK",
                             "MPI_LOCALNRANKS",
                             "OMPI_COMM_WORLD_LOCAL_SIZE",
                             "LOCAL_WORLD_SIZE",
                             "RANK",
                             "WORLD_SIZE",
                             "LOCAL_RANK",
                             "ZT_RENDEZVOUS",
                             "ZT_RENDEZVOUS_TIMEOUT",
                             "MASTER_ADDR",
                             "MASTER_PORT",
                             "TORCHELASTIC_USE_AGENT_STORE",
                             "ZT_JOB_ID",
                             "SLURM_JOB_ID",
                             "SLURM_STEP_ID",
                             "TORCHELASTIC_RUN_ID"}) {
      ::unsetenv(name);
    }
  }
  static void set(const char* name, const char* value) { ::setenv(name, value, 1); }

  // The InputError's message, or "" when none is thrown.
  template <typename F>
  static std::string input_error(F&& f) {
    try {
      f();
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(RendezvousEnv, NoLauncherMeansRankZeroOfOneAndNoRendezvous) {
  const LaunchInfo launch = detect_launch();
  EXPECT_EQ(launch.rank, 0);
  EXPECT_EQ(launch.world_size, 1);
  EXPECT_EQ(launch.source, "single");
  EXPECT_EQ(rendezvous_from_env(launch).method, RendezvousMethod::kSingle);
  EXPECT_EQ(share_from_rank0(launch, {}, {1, 2, 3}, 3), (std::vector<std::uint8_t>{1, 2, 3}));
}

TEST_F(RendezvousEnv, RanksOnThisNodeAreTheLaunchersOwnOrNone) {
  EXPECT_EQ(launcher_ranks_on_this_node("torchrun"), 0);  // no count given: no guess
  EXPECT_EQ(ranks_on_this_node(4), 4);                    // ... where a count is needed, the world's
  set("LOCAL_WORLD_SIZE", "8");                           // torchrun's
  EXPECT_EQ(launcher_ranks_on_this_node("torchrun"), 8);
  EXPECT_EQ(ranks_on_this_node(16), 8);
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "1");  // a torchrun under mpirun (one process a node): still 8
  EXPECT_EQ(launcher_ranks_on_this_node("torchrun"), 8);
  EXPECT_EQ(launcher_ranks_on_this_node("OpenMPI"), 1);
  EXPECT_EQ(launcher_ranks_on_this_node("ZT_RANK"), 0);  // ZT_RANK and Slurm say nothing of the node
  EXPECT_EQ(launcher_ranks_on_this_node("Slurm"), 0);
  set("LOCAL_WORLD_SIZE", "eight");  // not a number: not taken
  EXPECT_EQ(launcher_ranks_on_this_node("torchrun"), 0);
  set("MPI_LOCALNRANKS", "3");
  EXPECT_EQ(launcher_ranks_on_this_node("PMI"), 3);
}

TEST_F(RendezvousEnv, ZtVariablesWinOverTheLaunchers) {  // but MPI's own, below
  set("SLURM_PROCID", "1");
  set("SLURM_NTASKS", "4");
  set("ZT_RANK", "2");
  set("ZT_WORLD_SIZE", "3");
  const LaunchInfo launch = detect_launch();
  EXPECT_EQ(launch.source, "ZT_RANK");
  EXPECT_EQ(launch.rank, 2);
  EXPECT_EQ(launch.world_size, 3);
  EXPECT_EQ(launch.local_rank, 2);  // not given: the rank
}

TEST_F(RendezvousEnv, ZtRankTakesTheLocalRankOfALauncherThatAgrees) {
  // A wrapper under srun sets ZT_RANK and ZT_WORLD_SIZE from Slurm's and no ZT_LOCAL_RANK: the
  // second node's first rank is rank 4, local rank 0 (its GPU 0, not GPU 4).
  set("SLURM_PROCID", "4");
  set("SLURM_NTASKS", "8");
  set("SLURM_LOCALID", "0");
  set("ZT_RANK", "4");
  set("ZT_WORLD_SIZE", "8");
  LaunchInfo launch = detect_launch();
  EXPECT_EQ(launch.source, "ZT_RANK");
  EXPECT_EQ(launch.local_rank, 0);
  set("ZT_LOCAL_RANK", "3");  // given: it wins
  EXPECT_EQ(detect_launch().local_rank, 3);
  ::unsetenv("ZT_LOCAL_RANK");
  set("SLURM_PROCID", "5");  // a launcher counting another rank is not this process's: the rank
  EXPECT_EQ(detect_launch().local_rank, 4);
}

TEST_F(RendezvousEnv, EachLauncherIsRead) {
  struct Case {
    const char *rank, *world, *local, *source;
  };
  for (const Case& c :
       {Case{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OpenMPI"},
        Case{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "Slurm"},
        Case{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI"}, Case{"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"}}) {
    SetUp();
    set(c.rank, "5");
    set(c.world, "8");
    set(c.local, "1");
    const LaunchInfo launch = detect_launch();
    EXPECT_EQ(launch.source, c.source);
    EXPECT_EQ(launch.rank, 5) << c.source;
    EXPECT_EQ(launch.world_size, 8) << c.source;
    EXPECT_EQ(launch.local_rank, 1) << c.source;
  }
}

TEST_F(RendezvousEnv, MalformedValuesNameTheVariable) {
  set("ZT_RANK", "5");
  set("ZT_WORLD_SIZE", "2");
  EXPECT_EQ(input_error(detect_launch), "ZT_RANK=5 is not below ZT_WORLD_SIZE=2");
  set("ZT_WORLD_SIZE", "two");
  EXPECT_EQ(input_error(detect_launch), "ZT_WORLD_SIZE='two' is not a non-negative integer");
  set("ZT_WORLD_SIZE", "99999999999999999999");  // a number, only past an int
  EXPECT_EQ(input_error(detect_launch), "ZT_WORLD_SIZE='99999999999999999999' is too large (at most 2147483647)");
  set("ZT_WORLD_SIZE", "0");
  EXPECT_EQ(input_error(detect_launch), "ZT_WORLD_SIZE=0 must be at least 1");
  set("ZT_RANK", "0");  // a local rank is a rank of the world too: one past it names no GPU or slot
  set("ZT_WORLD_SIZE", "2");
  set("ZT_LOCAL_RANK", "2");
  EXPECT_EQ(input_error(detect_launch), "ZT_LOCAL_RANK=2 is not below ZT_WORLD_SIZE=2");
  SetUp();
  set("OMPI_COMM_WORLD_SIZE", "4");
  EXPECT_EQ(input_error(detect_launch), "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
  SetUp();
  set("OMPI_COMM_WORLD_RANK", "-1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_EQ(input_error(detect_launch), "OMPI_COMM_WORLD_RANK='-1' is not a non-negative integer");
  SetUp();
  set("RANK", "3");          // a generic name alone is not torchrun
  set("SLURM_PROCID", "0");  // salloc's shell: no tasks, no rank
  EXPECT_EQ(detect_launch().source, "single");
}

TEST_F(RendezvousEnv, ExplicitMethodsAreParsed) {
  LaunchInfo launch{1, 4, 1, "ZT_RANK"};
  set("ZT_RENDEZVOUS", "file:/shared/run/id");
  set("ZT_RENDEZVOUS_TIMEOUT", "2.5");
  RendezvousOptions options = rendezvous_from_env(launch);
  EXPECT_EQ(options.method, RendezvousMethod::kFile);
  EXPECT_EQ(options.file_path, "/shared/run/id");
  EXPECT_EQ(options.timeout_s, 2.5);
  set("ZT_RENDEZVOUS", "tcp:node-001:29500");
  options = rendezvous_from_env(launch);
  EXPECT_EQ(options.method, RendezvousMethod::kTcp);
  EXPECT_EQ(options.host, "node-001");
  EXPECT_EQ(options.port, 29500);
  EXPECT_EQ(rendezvous_name(options), "tcp:node-001:29500");
  set("ZT_RENDEZVOUS", "tcp:[::1]:7");
  options = rendezvous_from_env(launch);
  EXPECT_EQ(options.host, "::1");
  EXPECT_EQ(rendezvous_name(options), "tcp:[::1]:7");
}

// The job's name, which keeps two jobs on one port or file apart: ZT_JOB_ID, else Slurm's job and
// step, else torchrun's run id; none without them.
TEST_F(RendezvousEnv, TheJobIsNamedByItsLauncher) {
  const LaunchInfo launch{1, 4, 1, "ZT_RANK"};
  set("ZT_RENDEZVOUS", "tcp:node-001:29500");
  EXPECT_EQ(rendezvous_from_env(launch).job, "");
  set("TORCHELASTIC_RUN_ID", "abc");
  set("SLURM_JOB_ID", "4242");
  set("SLURM_STEP_ID", "0");
  // Launched by hand (ZT_RANK): a Slurm or torchrun name in one rank's shell is not the job's.
  EXPECT_EQ(rendezvous_from_env(launch).job, "");
  EXPECT_EQ(rendezvous_from_env(LaunchInfo{1, 4, 1, "torchrun"}).job, "torchrun:abc");
  EXPECT_EQ(rendezvous_from_env(LaunchInfo{1, 4, 1, "Slurm"}).job, "slurm:4242");  // any step: one per rank
  set("ZT_JOB_ID", "mine");
  EXPECT_EQ(rendezvous_from_env(launch).job, "mine");
  EXPECT_EQ(rendezvous_from_env(LaunchInfo{1, 4, 1, "Slurm"}).job, "mine");
}

// ZT_RANK left in a shell and mpirun's own rank: refused, naming both, rather than every rank of
// the job taking ZT_RANK's rank and GPU; values that agree are fine.
TEST_F(RendezvousEnv, ZtVariablesContradictingMpiAreRefused) {
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "2");
  set("ZT_RANK", "0");
  set("ZT_WORLD_SIZE", "1");
  const std::string error = input_error([] { detect_launch(); });
  EXPECT_NE(error.find("ZT_RANK=0 and ZT_WORLD_SIZE=1 disagree with OpenMPI's OMPI_COMM_WORLD_RANK=1"),
            std::string::npos)
      << error;
  set("ZT_RANK", "1");
  set("ZT_WORLD_SIZE", "2");
  EXPECT_EQ(detect_launch().rank, 1);
  set("PMI_RANK", "1");  // half-set: no launch to hold ZT_RANK against
  EXPECT_EQ(detect_launch().rank, 1);
  set("PMIX_RANK", "0");  // srun --mpi=pmix: the rank alone
  EXPECT_NE(input_error([] { detect_launch(); }).find("ZT_RANK=1 disagrees with PMIX_RANK=0"), std::string::npos);
}

TEST_F(RendezvousEnv, MpiWorldMustBeTheLaunchersWorld) {
  // OpenMPI's and PMI's variables against the world MPI_Init gave: PMI_SIZE = 2 set by hand (or by
  // another MPI's mpiexec) beside a world of one would train each process alone.
  const LaunchInfo pmi{0, 2, 0, "PMI"};
  EXPECT_EQ(mpi_world_mismatch(pmi, 0, 2), "");
  EXPECT_EQ(mpi_world_mismatch(pmi, 0, 1),
            "PMI_RANK=0 and PMI_SIZE=2 say rank 0 of 2, but MPI started this process as rank 0 of 1 (started by "
            "another MPI's launcher, or the variables set by hand? start the ranks with the mpirun of the MPI this "
            "binary was built with, or unset them)");
  EXPECT_NE(mpi_world_mismatch({1, 3, 1, "OpenMPI"}, 2, 3).find("OMPI_COMM_WORLD_RANK=1 and OMPI_COMM_WORLD_SIZE=3"),
            std::string::npos);
  // Launchers whose variables do not come from MPI are not held to its world (srun's Slurm
  // variables count nodes' proxies under some MPIs), nor is a process no launcher named ...
  EXPECT_EQ(mpi_world_mismatch({0, 2, 0, "Slurm"}, 1, 4), "");
  EXPECT_EQ(mpi_world_mismatch({0, 2, 0, "Slurm"}, 1, 2), "");  // the same world, ranks numbered apart
  EXPECT_EQ(mpi_world_mismatch(LaunchInfo{}, 0, 2), "");
  // ... but a world smaller than theirs is processes training apart (srun --mpi=pmix beside an MPI
  // that does not join the job: worlds of one, each training alone, as a trial found).
  EXPECT_EQ(mpi_world_mismatch({1, 2, 1, "Slurm"}, 0, 1),
            "SLURM_PROCID=1 and SLURM_NTASKS=2 say rank 1 of 2, but MPI started this process as rank 0 of 1: each "
            "MPI world would train apart (srun --mpi=pmix beside an MPI that does not join the PMIx job, or variables "
            "left from another launch?); start the ranks with the mpirun of the MPI this binary was built with, or "
            "unset them");
  EXPECT_NE(mpi_world_mismatch({0, 2, 0, "torchrun"}, 0, 1).find("RANK=0 and WORLD_SIZE=2 say rank 0 of 2"),
            std::string::npos);
  EXPECT_NE(mpi_world_mismatch({1, 2, 1, "ZT_RANK"}, 0, 1).find("ZT_RANK=1 and ZT_WORLD_SIZE=2"), std::string::npos);
  // MPI's own launcher's world, where it says one, is judged rather than the allocation's Slurm
  // variables it runs in (sbatch -n 4, then MPICH's mpiexec -n 2: a launch of fewer ranks).
  set("PMI_RANK", "1");
  set("PMI_SIZE", "2");
  EXPECT_EQ(mpi_world_mismatch({0, 4, 0, "Slurm"}, 1, 2), "");
  EXPECT_NE(mpi_world_mismatch({0, 4, 0, "Slurm"}, 0, 1).find("PMI_RANK=1 and PMI_SIZE=2 say rank 1 of 2"),
            std::string::npos);
}

TEST_F(RendezvousEnv, MalformedMethodsNameTheVariable) {
  LaunchInfo launch{0, 2, 0, "ZT_RANK"};
  const auto error_for = [&](const char* spec) {
    set("ZT_RENDEZVOUS", spec);
    return input_error([&] { rendezvous_from_env(launch); });
  };
  EXPECT_EQ(error_for("bogus"), "ZT_RENDEZVOUS='bogus' is not one of: mpi, file:/shared/path, tcp:host:port, single");
  EXPECT_EQ(error_for("file:"), "ZT_RENDEZVOUS='file:' is not one of: mpi, file:/shared/path, tcp:host:port, single");
  EXPECT_EQ(error_for("tcp:host"), "ZT_RENDEZVOUS='tcp:host': expected tcp:host:port (an IPv6 address in brackets)");
  EXPECT_EQ(error_for("tcp:host:99999"), "ZT_RENDEZVOUS='tcp:host:99999': port '99999' is not a number in 1..65535");
  EXPECT_EQ(error_for("tcp:host:http"), "ZT_RENDEZVOUS='tcp:host:http': port 'http' is not a number in 1..65535");
  EXPECT_EQ(error_for("single"), "ZT_RENDEZVOUS=single, but this is rank 0 of 2 (from ZT_RANK)");
  set("ZT_RENDEZVOUS", "file:/x");
  set("ZT_RENDEZVOUS_TIMEOUT", "-1");
  EXPECT_EQ(input_error([&] { rendezvous_from_env(launch); }),
            "ZT_RENDEZVOUS_TIMEOUT='-1' is not a positive number of seconds");
  set("ZT_RENDEZVOUS_TIMEOUT", "0");  // no time to meet at all
  EXPECT_EQ(input_error([&] { rendezvous_from_env(launch); }),
            "ZT_RENDEZVOUS_TIMEOUT='0' is not a positive number of seconds");
}

TEST_F(RendezvousEnv, UnsetMethodFollowsTheLauncher) {
  LaunchInfo launch{0, 2, 0, "ZT_RANK"};
  EXPECT_NE(input_error([&] { rendezvous_from_env(launch); })
                .find("rank 0 of 2 (from ZT_RANK) needs a rendezvous: set ZT_RENDEZVOUS=file:/shared/path or "
                      "tcp:host:port, or MASTER_ADDR and MASTER_PORT"),
            std::string::npos);
  // One of torchrun's pair alone is named.
  set("MASTER_ADDR", "10.0.0.1");
  EXPECT_NE(input_error([&] {
              rendezvous_from_env(launch);
            }).find("needs a rendezvous: MASTER_ADDR is set but MASTER_PORT is not; set ZT_RENDEZVOUS="),
            std::string::npos);
  set("MASTER_PORT", "29500");
  RendezvousOptions options = rendezvous_from_env(launch);
  EXPECT_EQ(options.method, RendezvousMethod::kTcp);
  EXPECT_EQ(options.host, "10.0.0.1");
  EXPECT_EQ(options.port, 29500);
  set("TORCHELASTIC_USE_AGENT_STORE", "True");  // torchrun's agent serves its store on MASTER_PORT
  EXPECT_EQ(rendezvous_from_env(launch).port, 29501);
  // srun without PMI: Slurm's variables only. MPI would start each rank as a world of one, so the
  // rendezvous is not MPI's.
  launch.source = "Slurm";
  EXPECT_FALSE(launched_by_mpi());
  EXPECT_EQ(rendezvous_from_env(launch).method, RendezvousMethod::kTcp);
  for (const char* mpi_variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    SCOPED_TRACE(mpi_variable);
    set(mpi_variable, "2");
    EXPECT_TRUE(launched_by_mpi());
#ifdef ZT_HAVE_MPI
    EXPECT_EQ(rendezvous_from_env(launch).method, RendezvousMethod::kMpi);
#else
    EXPECT_EQ(rendezvous_from_env(launch).method, RendezvousMethod::kTcp);
#endif
    ::unsetenv(mpi_variable);
  }
}

// Rank 0 and rank 1 of a 2-rank job as two threads of this process.
std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> share_between_threads(const RendezvousOptions& o) {
  const std::vector<std::uint8_t> blob = {7, 0, 255, 42};
  auto other = std::async(std::launch::async, [&] { return share_from_rank0({1, 2, 1, "ZT_RANK"}, o, {}, 4); });
  auto root = share_from_rank0({0, 2, 0, "ZT_RANK"}, o, blob, 4);
  return {root, other.get()};
}

TEST_F(RendezvousEnv, FileMethodBetweenThreadsLeavesNothingBehind) {
  const auto dir = std::filesystem::temp_directory_path() / ("zt_rdv_unit_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  RendezvousOptions options{RendezvousMethod::kFile, (dir / "id").string(), "", 0, 10.0, ""};
  const auto [root, other] = share_between_threads(options);
  EXPECT_EQ(root, (std::vector<std::uint8_t>{7, 0, 255, 42}));
  EXPECT_EQ(other, root);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST_F(RendezvousEnv, TcpMethodBetweenThreads) {
  // A port the kernel says is free now.
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(probe);
  RendezvousOptions options{RendezvousMethod::kTcp, "", "127.0.0.1", ntohs(addr.sin_port), 10.0, ""};
  const auto [root, other] = share_between_threads(options);
  EXPECT_EQ(other, root);
}

}  // namespace
}  // namespace zt
