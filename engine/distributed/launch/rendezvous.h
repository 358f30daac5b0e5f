// How the ranks of a job find each other before any communicator exists: which rank this process
// is (from the launcher's environment), and how rank 0 hands every rank a small opaque blob (the
// NCCL unique id) through MPI, a file on a shared filesystem, or a TCP socket. Pure host code.
// See docs/multi_node.md, "Rendezvous: how ranks find each other".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zt {

// Who this process is, as its launcher said.
struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;             // index among the ranks on this node (picks the GPU)
  std::string source = "single";  // "ZT_RANK", "OpenMPI", "Slurm", "PMI", "torchrun" or "single"
};

// Reads, first match wins: ZT_RANK/ZT_WORLD_SIZE/ZT_LOCAL_RANK; OpenMPI (OMPI_COMM_WORLD_RANK/
// _SIZE/_LOCAL_RANK); Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID); PMI (PMI_RANK/PMI_SIZE,
// MPI_LOCALRANKID); torchrun (RANK/WORLD_SIZE/LOCAL_RANK). None: rank 0 of 1 ("single"). Without
// ZT_LOCAL_RANK, ZT_RANK takes the local rank of another launcher that counts the same rank and
// world; a local rank nothing gives is taken to be the rank (right on one node). Throws InputError
// naming the variable for a non-number, rank >= world size, or a rank without a world size (or the
// reverse; for torchrun's and Slurm's names, which shells set for other reasons, one alone is ignored).
LaunchInfo detect_launch();

// Ranks of this job on this node, as the launcher says (OMPI_COMM_WORLD_LOCAL_SIZE, torchrun's
// LOCAL_WORLD_SIZE, MPI_LOCALNRANKS); without one, `world_size` (one node, as detect_launch takes
// the local rank to be the rank). Never throws: a value that is not a positive number is not taken.
int ranks_on_this_node(int world_size);
// The ranks on this node as the launcher that started this process says (`source`, LaunchInfo's:
// torchrun's LOCAL_WORLD_SIZE, OpenMPI's OMPI_COMM_WORLD_LOCAL_SIZE, PMI's MPI_LOCALNRANKS), 0 where
// it says nothing (ZT_RANK, Slurm, a value that is not a positive number): no guess, and never
// another launcher's count (a torchrun started under mpirun, one process a node, sees mpirun's 1).
int launcher_ranks_on_this_node(const std::string& source);
// The same where the world size is not known yet (a config read before the launch is examined):
// detect_launch's world size, 1 where the launch's variables are unusable (its own check reports them).
int ranks_on_this_node();

// True when MPI's own environment is there (OpenMPI's, PMI's or PMIx's variables): MPI_Init
// would then join the launcher's world. Slurm's variables alone (srun without PMI) do not count.
bool launched_by_mpi();

// Why MPI's world disagrees with the launch's variables, or "" where it agrees: OpenMPI's or PMI's
// variables say rank r of n, MPI_Init gave this process another rank or world size. A world of one
// beside PMI_SIZE = 2 is a process started by another MPI's launcher (MPICH's mpiexec starting an
// Open MPI binary), or variables set by hand: each process would train alone as a world of one.
// Slurm's, torchrun's or ZT_RANK's variables are held to a world at least theirs (srun's tasks may
// be proxies of several ranks each, never fewer ranks than they say), unless OpenMPI's or PMI's
// world variables are there too: those are judged then (mpiexec inside an allocation).
std::string mpi_world_mismatch(const LaunchInfo& launch, int mpi_rank, int mpi_world_size);

// MPI initialised at MPI_THREAD_MULTIPLE (a communicator's progress thread makes the collective
// calls while the main thread may call MPI_Abort on a timeout), by whichever part of the process
// comes first (the MPI rendezvous, the MPI communicator); the thread level MPI provides. Its
// finalisation is registered with std::atexit then: skipped where MPI is finalised already or a
// rendezvous broadcast was abandoned (MPI_Finalize would wait for it forever). RuntimeError naming
// `who` where MPI was finalised already or cannot start. Built with MPI only.
int ensure_mpi_initialised(const char* who);

enum class RendezvousMethod { kSingle, kMpi, kFile, kTcp };

struct RendezvousOptions {
  RendezvousMethod method = RendezvousMethod::kSingle;
  std::string file_path;   // kFile: the file rank 0 writes (on a filesystem every rank sees)
  std::string host;        // kTcp: where rank 0 listens (it binds every interface of that family)
  int port = 0;            // kTcp
  double timeout_s = 300;  // the whole rendezvous, on every rank
  // The job's own name where its launcher gives one (ZT_JOB_ID; Slurm's SLURM_JOB_ID.SLURM_STEP_ID;
  // torchrun's TORCHELASTIC_RUN_ID), "" otherwise. Ranks of two jobs that share a port or a file
  // (a fixed MASTER_PORT in two batch jobs on one first node) then do not take each other's rank 0.
  std::string job;
};

// ZT_RENDEZVOUS = "mpi" | "file:/shared/path" | "tcp:host:port" | "single"; ZT_RENDEZVOUS_TIMEOUT
// (seconds, default 300). Unset: single for a world of 1; mpi when launched_by_mpi() and MPI is
// built; tcp from MASTER_ADDR/MASTER_PORT (torchrun's names; MASTER_PORT + 1 when torchrun's
// agent holds MASTER_PORT for its own store); otherwise InputError listing the choices.
RendezvousOptions rendezvous_from_env(const LaunchInfo& launch);

// Rank 0 passes `blob_on_rank0` (exactly `size` bytes); every rank returns rank 0's blob. Throws
// RuntimeError naming the method and the file or address when a peer does not arrive within
// options.timeout_s, or when the ranks disagree on the world size.
std::vector<std::uint8_t> share_from_rank0(const LaunchInfo& launch, const RendezvousOptions& options,
                                           std::vector<std::uint8_t> blob_on_rank0, std::size_t size);

// "mpi", "file:/path", "tcp:host:port" or "single", for logs and errors.
std::string rendezvous_name(const RendezvousOptions& options);

}  // namespace zt
