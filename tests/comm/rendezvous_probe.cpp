// zt_rendezvous_probe: one rank of a rendezvous, configured from the environment exactly as the
// engine would be. Rank 0 makes a random 128-byte blob (the size of an ncclUniqueId); every rank
// prints "rank R/W blob <hex>". Exit 2 with a one-line message for bad input, 1 for other failures.
// ZT_PROBE_RANK0_DELAY_S (tests only) makes rank 0 sleep before the rendezvous; with the MPI method
// the probe then initialises MPI first, since MPI_Init waits for every rank and no timeout bounds it.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "engine/base/core/check.h"
#include "engine/distributed/launch/rendezvous.h"
#ifdef ZT_HAVE_MPI
#include <mpi.h>
#endif

int main() {
  constexpr std::size_t kBlobBytes = 128;
  try {
    const zt::LaunchInfo launch = zt::detect_launch();
    const zt::RendezvousOptions options = zt::rendezvous_from_env(launch);
    std::vector<std::uint8_t> blob;
    const char* delay = std::getenv("ZT_PROBE_RANK0_DELAY_S");
    [[maybe_unused]] const bool probe_owns_mpi = delay != nullptr && options.method == zt::RendezvousMethod::kMpi;
#ifdef ZT_HAVE_MPI
    int provided = 0;
    if (probe_owns_mpi) MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
#endif
    if (launch.rank == 0) {
      if (delay != nullptr) std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(delay)));
      std::mt19937_64 rng(static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
                          static_cast<std::uint64_t>(::getpid()));
      for (std::size_t i = 0; i < kBlobBytes; ++i) blob.push_back(static_cast<std::uint8_t>(rng()));
    }
    const std::vector<std::uint8_t> shared = zt::share_from_rank0(launch, options, std::move(blob), kBlobBytes);
    std::string hex;
    for (std::uint8_t byte : shared) hex += fmt::format("{:02x}", byte);
    fmt::print("rank {}/{} blob {}\n", launch.rank, launch.world_size, hex);
    std::fflush(stdout);
#ifdef ZT_HAVE_MPI
    if (probe_owns_mpi) MPI_Finalize();  // only after a success: a failed rank exits without it
#endif
    return 0;
  } catch (const zt::InputError& e) {
    std::fprintf(stderr, "zt_rendezvous_probe: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_rendezvous_probe: error: %s\n", e.what());
    return 1;
  }
}
