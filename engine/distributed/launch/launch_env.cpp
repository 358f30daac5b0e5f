// Who this process is before any communicator exists: the launcher's variables (ZT_RANK, OpenMPI,
// Slurm, PMI, torchrun) read into a LaunchInfo, held against MPI's own world, and the ranks on this
// node. The rendezvous that follows is rendezvous.cpp's.
#include <climits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/base/core/check.h"
#include "engine/distributed/launch/rendezvous.h"
#include "engine/distributed/launch/rendezvous_methods.h"

namespace zt {

using detail::env_value;
using detail::parse_count;

namespace {

int parse_env_int(const char* name, const char* text) {
  const int value = parse_count(text);
  if (value >= 0) return value;
  // A run of digits past an int is a number, only too large: said so.
  const std::string_view digits(text);
  if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) {
    throw_input_error("{}='{}' is too large (at most {})", name, text, INT_MAX);
  }
  throw_input_error("{}='{}' is not a non-negative integer", name, text);
}

struct LauncherVars {
  const char* source;
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_size;  // the launcher's count of ranks on this node (none for ZT_RANK, Slurm)
  // Both needed to count: RANK and WORLD_SIZE may be set for other reasons, and salloc and sbatch
  // set SLURM_PROCID=0 in their shell without SLURM_NTASKS unless tasks were asked for.
  bool both_needed;
};

constexpr LauncherVars kLaunchers[] = {
    {"ZT_RANK", "ZT_RANK", "ZT_WORLD_SIZE", "ZT_LOCAL_RANK", nullptr, false},
    {"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", false},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, true},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", false},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", true},
};

// What one launcher's variables say, or nullopt where they are absent (or, for names set for other
// reasons, half there). InputError for a malformed value.
std::optional<LaunchInfo> read_launcher(const LauncherVars& vars) {
  const char* rank_text = env_value(vars.rank);
  const char* world_text = env_value(vars.world);
  if (rank_text == nullptr && world_text == nullptr) return std::nullopt;
  if (rank_text == nullptr || world_text == nullptr) {
    if (vars.both_needed) return std::nullopt;
    throw_input_error("{} is set but {} is not", rank_text ? vars.rank : vars.world,
                      rank_text ? vars.world : vars.rank);
  }
  LaunchInfo info;
  info.source = vars.source;
  info.rank = parse_env_int(vars.rank, rank_text);
  info.world_size = parse_env_int(vars.world, world_text);
  if (info.world_size < 1) throw_input_error("{}={} must be at least 1", vars.world, info.world_size);
  if (info.rank >= info.world_size) {
    throw_input_error("{}={} is not below {}={}", vars.rank, info.rank, vars.world, info.world_size);
  }
  info.local_rank = info.rank;
  if (const char* local = env_value(vars.local_rank)) {
    info.local_rank = parse_env_int(vars.local_rank, local);
    if (info.local_rank >= info.world_size) {
      throw_input_error("{}={} is not below {}={}", vars.local_rank, info.local_rank, vars.world, info.world_size);
    }
  }
  return info;
}

}  // namespace

LaunchInfo detect_launch() {
  for (const LauncherVars& vars : kLaunchers) {
    std::optional<LaunchInfo> info = read_launcher(vars);
    if (!info) continue;
    // ZT_RANK wins, but not against the MPI launcher that started this process: values left in the
    // shell from a launch by hand would give every rank of an mpirun the same rank and GPU.
    if (&vars == &kLaunchers[0]) {
      for (const LauncherVars* mpi : {&kLaunchers[1], &kLaunchers[3]}) {  // OpenMPI, PMI
        std::optional<LaunchInfo> other;
        try {
          other = read_launcher(*mpi);
        } catch (const InputError&) {  // half-set or malformed: not a launch to hold ZT_RANK against
        }
        if (other && (other->rank != info->rank || other->world_size != info->world_size)) {
          throw_input_error(
              "{}={} and {}={} disagree with {}'s {}={} and {}={} (ZT_ variables left in the environment from a "
              "launch by hand? unset them, or the MPI launcher's where it only starts the processes that set them)",
              vars.rank, info->rank, vars.world, info->world_size, mpi->source, mpi->rank, other->rank, mpi->world,
              other->world_size);
        }
      }
      if (const char* pmix = env_value("PMIX_RANK");
          pmix != nullptr && parse_count(pmix) >= 0 && parse_count(pmix) != info->rank) {  // srun --mpi=pmix
        throw_input_error("{}={} disagrees with PMIX_RANK={} (ZT_ variables left in the environment? unset them)",
                          vars.rank, info->rank, pmix);
      }
      // No ZT_LOCAL_RANK (a wrapper that sets ZT_RANK from its launcher's): the launcher's local rank
      // where it counts the same rank and world, rather than the global rank, which under
      // `--map-by node` or on a second node picks another rank's GPU.
      if (env_value(vars.local_rank) == nullptr) {
        for (const LauncherVars& other_vars : std::span(kLaunchers).subspan(1)) {
          std::optional<LaunchInfo> other;
          try {
            other = read_launcher(other_vars);
          } catch (const InputError&) {  // malformed: not a launcher to take a local rank from
          }
          if (other && other->rank == info->rank && other->world_size == info->world_size &&
              env_value(other_vars.local_rank) != nullptr) {
            info->local_rank = other->local_rank;
            break;
          }
        }
      }
    }
    return *info;
  }
  return {};
}

std::string mpi_world_mismatch(const LaunchInfo& given, int mpi_rank, int mpi_world_size) {
  LaunchInfo launch = given;
  bool mpis_own = launch.source == "OpenMPI" || launch.source == "PMI";
  // Where MPI's own launcher says its world (OpenMPI's, or PMI's: MPICH's mpiexec), that is judged,
  // not the Slurm variables of an allocation it runs in (sbatch -n 8, then mpiexec -n 4).
  for (const LauncherVars* mpi : {&kLaunchers[1], &kLaunchers[3]}) {
    if (mpis_own) break;
    if (std::optional<LaunchInfo> own = read_launcher(*mpi)) {
      launch = *own;
      mpis_own = true;
    }
  }
  const LauncherVars* vars = nullptr;
  for (const LauncherVars& v : kLaunchers) {
    if (launch.source == v.source) vars = &v;
  }
  if (vars == nullptr || (launch.rank == mpi_rank && launch.world_size == mpi_world_size)) return "";
  // Variables not MPI's own (Slurm's, torchrun's, ZT_RANK) need not count MPI's ranks (srun's tasks
  // may be the nodes' proxies, each starting several), but a world smaller than they say is
  // processes that each train apart, the job's work done over: srun --mpi=pmix beside an MPI that
  // does not join the PMIx job comes up as worlds of one.
  if (!mpis_own && mpi_world_size >= launch.world_size) return "";
  return fmt::format("{}={} and {}={} say rank {} of {}, but MPI started this process as rank {} of {}{}", vars->rank,
                     launch.rank, vars->world, launch.world_size, launch.rank, launch.world_size, mpi_rank,
                     mpi_world_size,
                     mpis_own ? " (started by another MPI's launcher, or the variables set by hand? start the ranks "
                                "with the mpirun of the MPI this binary was built with, or unset them)"
                              : ": each MPI world would train apart (srun --mpi=pmix beside an MPI that does not join "
                                "the PMIx job, or variables left from another launch?); start the ranks with the "
                                "mpirun of the MPI this binary was built with, or unset them");
}

int ranks_on_this_node(int world_size) {
  for (const char* source : {"OpenMPI", "torchrun", "PMI"}) {  // the first launcher that says
    if (const int n = launcher_ranks_on_this_node(source); n > 0) return n;
  }
  return world_size;
}

int launcher_ranks_on_this_node(const std::string& source) {
  for (const LauncherVars& vars : kLaunchers) {
    if (source != vars.source || vars.local_size == nullptr) continue;
    const char* v = env_value(vars.local_size);
    const int n = v != nullptr ? parse_count(v) : 0;
    return n > 0 ? n : 0;
  }
  return 0;
}

int ranks_on_this_node() {
  int world_size = 1;
  try {
    world_size = detect_launch().world_size;
  } catch (const InputError&) {}
  return ranks_on_this_node(world_size);
}

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (env_value(var) != nullptr) return true;
  }
  return false;
}

}  // namespace zt
