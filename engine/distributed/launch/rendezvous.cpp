// Launch detection, the rendezvous method chosen from the environment, and share_from_rank0, which
// hands rank 0's blob to every rank by MPI broadcast (here) or by the methods in rendezvous_file.cpp
// and rendezvous_tcp.cpp. Every wait has a deadline, so a peer that never arrives becomes a one-line
// RuntimeError naming the method and the file or address.
#include "engine/distributed/launch/rendezvous.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "engine/base/core/check.h"
#include "engine/distributed/launch/rendezvous_methods.h"
#ifdef ZT_HAVE_MPI
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "engine/distributed/launch/signals.h"
#endif

namespace zt {

namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// A non-negative int, or -1 when `text` is anything else (a sign, spaces, letters, overflow).
int parse_count(std::string_view text) {
  int value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size() && value >= 0 ? value : -1;
}

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
  const char* rank_text = env(vars.rank);
  const char* world_text = env(vars.world);
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
  if (const char* local = env(vars.local_rank)) {
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
      if (const char* pmix = env("PMIX_RANK");
          pmix != nullptr && parse_count(pmix) >= 0 && parse_count(pmix) != info->rank) {  // srun --mpi=pmix
        throw_input_error("{}={} disagrees with PMIX_RANK={} (ZT_ variables left in the environment? unset them)",
                          vars.rank, info->rank, pmix);
      }
      // No ZT_LOCAL_RANK (a wrapper that sets ZT_RANK from its launcher's): the launcher's local rank
      // where it counts the same rank and world, rather than the global rank, which under
      // `--map-by node` or on a second node picks another rank's GPU.
      if (env(vars.local_rank) == nullptr) {
        for (const LauncherVars& other_vars : std::span(kLaunchers).subspan(1)) {
          std::optional<LaunchInfo> other;
          try {
            other = read_launcher(other_vars);
          } catch (const InputError&) {  // malformed: not a launcher to take a local rank from
          }
          if (other && other->rank == info->rank && other->world_size == info->world_size &&
              env(other_vars.local_rank) != nullptr) {
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

std::string mpi_world_mismatch(const LaunchInfo& launch, int mpi_rank, int mpi_world_size) {
  const LauncherVars* vars = nullptr;
  for (const LauncherVars& v : kLaunchers) {
    if (launch.source == v.source) vars = &v;
  }
  if (vars == nullptr || (launch.rank == mpi_rank && launch.world_size == mpi_world_size)) return "";
  if (launch.source != "OpenMPI" && launch.source != "PMI") {
    // Variables not MPI's own (Slurm's, torchrun's, ZT_RANK) need not count MPI's ranks (srun's
    // tasks may be the nodes' proxies, each starting several), but a world smaller than they say is
    // processes that each train apart, the job's work done over: srun --mpi=pmix beside an MPI that
    // does not join the PMIx job comes up as worlds of one.
    if (mpi_world_size >= launch.world_size) return "";
    return fmt::format(
        "{}={} and {}={} say rank {} of {}, but MPI started this process as rank {} of {}: each MPI world would "
        "train apart (srun --mpi=pmix beside an MPI that does not join the PMIx job, or variables left from another "
        "launch?); start the ranks with the mpirun of the MPI this binary was built with, or unset them",
        vars->rank, launch.rank, vars->world, launch.world_size, launch.rank, launch.world_size, mpi_rank,
        mpi_world_size);
  }
  return fmt::format(
      "{}={} and {}={} say rank {} of {}, but MPI started this process as rank {} of {} (started by another MPI's "
      "launcher, or the variables set by hand? start the ranks with the mpirun of the MPI this binary was built "
      "with, or unset them)",
      vars->rank, launch.rank, vars->world, launch.world_size, launch.rank, launch.world_size, mpi_rank,
      mpi_world_size);
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
    const char* v = env(vars.local_size);
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

namespace {

// `what` names the variable and its value for the error.
int parse_port(const std::string& what, std::string_view text) {
  const int port = parse_count(text);
  if (port < 1 || port > 65535) throw_input_error("{}: port '{}' is not a number in 1..65535", what, text);
  return port;
}

void parse_rendezvous_spec(const std::string& spec, RendezvousOptions& options) {
  if (spec == "single") {
    options.method = RendezvousMethod::kSingle;
  } else if (spec == "mpi") {
#ifndef ZT_HAVE_MPI
    throw_input_error(
        "ZT_RENDEZVOUS=mpi, but this build has no MPI (install libopenmpi-dev and rebuild, or use "
        "file:/shared/path or tcp:host:port)");
#endif
    options.method = RendezvousMethod::kMpi;
  } else if (spec.starts_with("file:") && spec.size() > 5) {
    options.method = RendezvousMethod::kFile;
    options.file_path = spec.substr(5);
  } else if (spec.starts_with("tcp:")) {
    const std::string address = spec.substr(4);
    std::size_t colon = address.rfind(':');
    std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty() || host.find_first_of("[]") != std::string::npos ||
        (host.find(':') != std::string::npos && address.front() != '[')) {
      throw_input_error("ZT_RENDEZVOUS='{}': expected tcp:host:port (an IPv6 address in brackets)", spec);
    }
    options.method = RendezvousMethod::kTcp;
    options.host = host;
    options.port = parse_port(fmt::format("ZT_RENDEZVOUS='{}'", spec), std::string_view(address).substr(colon + 1));
  } else {
    throw_input_error("ZT_RENDEZVOUS='{}' is not one of: mpi, file:/shared/path, tcp:host:port, single", spec);
  }
}

}  // namespace

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (env(var) != nullptr) return true;
  }
  return false;
}

RendezvousOptions rendezvous_from_env(const LaunchInfo& launch) {
  RendezvousOptions options;
  if (const char* timeout = env("ZT_RENDEZVOUS_TIMEOUT")) {
    char* end = nullptr;
    options.timeout_s = std::strtod(timeout, &end);
    if (*end != '\0' || !std::isfinite(options.timeout_s) || options.timeout_s <= 0) {
      throw_input_error("ZT_RENDEZVOUS_TIMEOUT='{}' is not a positive number of seconds", timeout);
    }
  }
  // The launcher that gave the ranks names the job (a rank 0 in an salloc shell and others started
  // over ssh share no Slurm job id, but were launched by hand, by ZT_RANK: no job name then).
  if (const char* job = env("ZT_JOB_ID")) {
    options.job = job;
  } else if (const char* slurm = env("SLURM_JOB_ID"); slurm != nullptr && launch.source == "Slurm") {
    options.job = fmt::format("slurm:{}", slurm);  // not the step: one srun per rank is one job
  } else if (const char* run = env("TORCHELASTIC_RUN_ID"); run != nullptr && launch.source == "torchrun") {
    options.job = fmt::format("torchrun:{}", run);
  }
  // MPI's own variables, not the launcher's: srun without PMI sets Slurm's, and MPI would then
  // start each rank as a world of one.
  const bool by_mpi_launcher = launched_by_mpi();
  if (const char* spec = env("ZT_RENDEZVOUS")) {
    parse_rendezvous_spec(spec, options);
  } else if (launch.world_size == 1) {
    options.method = RendezvousMethod::kSingle;
#ifdef ZT_HAVE_MPI
  } else if (by_mpi_launcher) {
    options.method = RendezvousMethod::kMpi;
#endif
  } else if (env("MASTER_ADDR") != nullptr && env("MASTER_PORT") != nullptr) {
    options.method = RendezvousMethod::kTcp;
    options.host = env("MASTER_ADDR");
    options.port = parse_port(fmt::format("MASTER_PORT='{}'", env("MASTER_PORT")), env("MASTER_PORT"));
    // torchrun's agent serves its own store on MASTER_PORT when it says so (static rendezvous).
    const char* agent_store = env("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store != nullptr && std::string_view(agent_store) == "True") {
      if (options.port == 65535) throw_input_error("MASTER_PORT=65535: torchrun holds it, and 65536 is no port");
      ++options.port;
    }
  } else {
    // One of torchrun's pair without the other is named: "set MASTER_ADDR and MASTER_PORT" read
    // wrong to a user who had set one.
    const char* half = env("MASTER_ADDR") != nullptr   ? "MASTER_ADDR is set but MASTER_PORT is not; "
                       : env("MASTER_PORT") != nullptr ? "MASTER_PORT is set but MASTER_ADDR is not; "
                                                       : "";
    throw_input_error(
        "rank {} of {} (from {}) needs a rendezvous: {}set ZT_RENDEZVOUS=file:/shared/path or "
        "tcp:host:port, or MASTER_ADDR and MASTER_PORT{}",
        launch.rank, launch.world_size, launch.source, half,
        by_mpi_launcher ? " (this build has no MPI for ZT_RENDEZVOUS=mpi)" : "");
  }
  if (options.method == RendezvousMethod::kSingle && launch.world_size != 1) {
    throw_input_error("ZT_RENDEZVOUS=single, but this is rank {} of {} (from {})", launch.rank, launch.world_size,
                      launch.source);
  }
  return options;
}

std::string rendezvous_name(const RendezvousOptions& options) {
  switch (options.method) {
    case RendezvousMethod::kSingle: return "single";
    case RendezvousMethod::kMpi: return "mpi";
    case RendezvousMethod::kFile: return "file:" + options.file_path;
    case RendezvousMethod::kTcp:
      if (options.host.find(':') != std::string::npos) return fmt::format("tcp:[{}]:{}", options.host, options.port);
      return fmt::format("tcp:{}:{}", options.host, options.port);
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------- MPI
#ifdef ZT_HAVE_MPI
namespace {
// Set when a broadcast was abandoned: MPI_Finalize would then wait for it forever.
std::atomic<bool> g_mpi_abandoned{false};
}  // namespace

// How long a rank that reported an error waits in MPI_Finalize for the others.
constexpr auto kErrorFinalizeGrace = std::chrono::seconds(5);

void finalize_mpi_at_exit() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised || g_mpi_abandoned.load()) return;
  // MPI_Finalize waits for every rank. Ranks that fail together (a config they disagree on) all
  // reach it within moments, and each prints its own line first; a rank that failed alone would
  // wait there while the others wait in a collective it will never join, until their timeout
  // (minutes). So after a reported error the wait is bounded: then the process exits with its
  // code, unfinalised, and mpirun ends the job (the others print where they were waiting).
  if (const int code = reported_exit_code(); code != 0) {
    std::thread([code] {
      std::this_thread::sleep_for(kErrorFinalizeGrace);
      std::fflush(nullptr);
      _exit(code);
    }).detach();
  }
  MPI_Finalize();
}
#endif

namespace {

#ifdef ZT_HAVE_MPI

std::vector<std::uint8_t> share_by_mpi(const LaunchInfo& launch, const RendezvousOptions& options,
                                       std::vector<std::uint8_t> blob, std::size_t size) {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (finalised) throw_runtime_error("rendezvous via mpi: MPI was already finalised in this process");
  if (!initialised) {
    // The thread level MpiCommunicator asks for; it then finds MPI initialised and leaves it be,
    // and this process finalises it at exit.
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw_runtime_error("rendezvous via mpi: MPI_Init_thread failed");
    }
    std::atexit(finalize_mpi_at_exit);
  }
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (rank != launch.rank || world != launch.world_size) {
    throw_runtime_error("rendezvous via mpi: MPI says rank {} of {}, but {} says rank {} of {}", rank, world,
                        launch.source, launch.rank, launch.world_size);
  }
  ZT_CHECK(size <= static_cast<std::size_t>(INT_MAX));
  blob.resize(size);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibcast(blob.data(), static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD, &request);
  const detail::Deadline deadline(options.timeout_s);
  for (int spins = 0;; ++spins) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return blob;
    if (deadline.passed()) {
      g_mpi_abandoned = true;
      throw_runtime_error("rendezvous via mpi: rank {} of {} timed out after {:g} s waiting for rank 0's broadcast",
                          launch.rank, launch.world_size, options.timeout_s);
    }
    if (spins > 1000) deadline.sleep(1);
  }
}
#else
std::vector<std::uint8_t> share_by_mpi(const LaunchInfo&, const RendezvousOptions&, std::vector<std::uint8_t>,
                                       std::size_t) {
  throw_runtime_error("rendezvous via mpi: this build has no MPI (install libopenmpi-dev and rebuild)");
}
#endif

}  // namespace

std::vector<std::uint8_t> share_from_rank0(const LaunchInfo& launch, const RendezvousOptions& options,
                                           std::vector<std::uint8_t> blob_on_rank0, std::size_t size) {
  ZT_CHECK(launch.rank >= 0 && launch.rank < launch.world_size, "rank {} of {}", launch.rank, launch.world_size);
  ZT_CHECK(launch.rank != 0 || blob_on_rank0.size() == size, "rank 0's blob has {} bytes, not {}", blob_on_rank0.size(),
           size);
  ZT_CHECK(size <= UINT32_MAX);
  const bool root = launch.rank == 0;
  switch (options.method) {
    case RendezvousMethod::kSingle:
      if (launch.world_size != 1) {
        throw_runtime_error("rendezvous single: this is rank {} of {}", launch.rank, launch.world_size);
      }
      return blob_on_rank0;
    case RendezvousMethod::kMpi: return share_by_mpi(launch, options, std::move(blob_on_rank0), size);
    case RendezvousMethod::kFile:
      return root ? detail::share_by_file_rank0(launch, options, blob_on_rank0)
                  : detail::share_by_file_other(launch, options, size);
    case RendezvousMethod::kTcp:
      return root ? detail::share_by_tcp_rank0(launch, options, blob_on_rank0)
                  : detail::share_by_tcp_other(launch, options, size);
  }
  ZT_CHECK(false, "unknown rendezvous method");
  return {};
}

}  // namespace zt
