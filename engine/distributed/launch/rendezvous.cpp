// The rendezvous method chosen from the environment (the launch itself: launch_env.cpp), and share_from_rank0, which
// hands rank 0's blob to every rank by MPI broadcast (here) or by the methods in rendezvous_file.cpp
// and rendezvous_tcp.cpp. Every wait has a deadline, so a peer that never arrives becomes a one-line
// RuntimeError naming the method and the file or address.
#include "engine/distributed/launch/rendezvous.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
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

using detail::env_value;
using detail::parse_count;

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

RendezvousOptions rendezvous_from_env(const LaunchInfo& launch) {
  RendezvousOptions options;
  if (const char* timeout = env_value("ZT_RENDEZVOUS_TIMEOUT")) {
    char* end = nullptr;
    options.timeout_s = std::strtod(timeout, &end);
    if (*end != '\0' || !std::isfinite(options.timeout_s) || options.timeout_s <= 0) {
      throw_input_error("ZT_RENDEZVOUS_TIMEOUT='{}' is not a positive number of seconds", timeout);
    }
  }
  // The launcher that gave the ranks names the job (a rank 0 in an salloc shell and others started
  // over ssh share no Slurm job id, but were launched by hand, by ZT_RANK: no job name then).
  if (const char* job = env_value("ZT_JOB_ID")) {
    options.job = job;
  } else if (const char* slurm = env_value("SLURM_JOB_ID"); slurm != nullptr && launch.source == "Slurm") {
    options.job = fmt::format("slurm:{}", slurm);  // not the step: one srun per rank is one job
  } else if (const char* run = env_value("TORCHELASTIC_RUN_ID"); run != nullptr && launch.source == "torchrun") {
    options.job = fmt::format("torchrun:{}", run);
  }
  // MPI's own variables, not the launcher's: srun without PMI sets Slurm's, and MPI would then
  // start each rank as a world of one.
  const bool by_mpi_launcher = launched_by_mpi();
  if (const char* spec = env_value("ZT_RENDEZVOUS")) {
    parse_rendezvous_spec(spec, options);
  } else if (launch.world_size == 1) {
    options.method = RendezvousMethod::kSingle;
#ifdef ZT_HAVE_MPI
  } else if (by_mpi_launcher) {
    options.method = RendezvousMethod::kMpi;
#endif
  } else if (env_value("MASTER_ADDR") != nullptr && env_value("MASTER_PORT") != nullptr) {
    options.method = RendezvousMethod::kTcp;
    options.host = env_value("MASTER_ADDR");
    options.port = parse_port(fmt::format("MASTER_PORT='{}'", env_value("MASTER_PORT")), env_value("MASTER_PORT"));
    // torchrun's agent serves its own store on MASTER_PORT when it says so (static rendezvous).
    const char* agent_store = env_value("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store != nullptr && std::string_view(agent_store) == "True") {
      if (options.port == 65535) throw_input_error("MASTER_PORT=65535: torchrun holds it, and 65536 is no port");
      ++options.port;
    }
  } else {
    // One of torchrun's pair without the other is named: "set MASTER_ADDR and MASTER_PORT" read
    // wrong to a user who had set one.
    const char* half = env_value("MASTER_ADDR") != nullptr   ? "MASTER_ADDR is set but MASTER_PORT is not; "
                       : env_value("MASTER_PORT") != nullptr ? "MASTER_PORT is set but MASTER_ADDR is not; "
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

}  // namespace

int ensure_mpi_initialised(const char* who) {
  int initialised = 0, finalised = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (finalised) throw_runtime_error("{}: MPI was already finalised in this process", who);
  if (initialised) {
    MPI_Query_thread(&provided);
    return provided;
  }
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    throw_runtime_error("{}: MPI_Init_thread failed", who);
  }
  // Finalised at exit, not when a communicator goes: a command failing on every rank at once
  // (ranks disagreeing on the config) unwinds past its communicator before each rank prints its
  // error line, and Open MPI's MPI_Finalize waits for every rank, so none exits before all printed.
  std::atexit(finalize_mpi_at_exit);
  return provided;
}
#endif

namespace {

#ifdef ZT_HAVE_MPI

std::vector<std::uint8_t> share_by_mpi(const LaunchInfo& launch, const RendezvousOptions& options,
                                       std::vector<std::uint8_t> blob, std::size_t size) {
  ensure_mpi_initialised("rendezvous via mpi");
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
