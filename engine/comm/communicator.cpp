// Work (polling with a deadline) and the choice of backend.
#include "engine/comm/communicator.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "engine/comm/local_communicator.h"
#include "engine/core/check.h"
#ifdef ZT_HAVE_MPI
#include "engine/comm/mpi_communicator.h"
#endif

namespace zt {

Work::Work(std::function<bool()> advance, std::string description, double timeout_s, const std::string* context,
           std::function<void(const std::string&)> on_timeout)
    : advance_(std::move(advance)),
      description_(std::move(description)),
      timeout_s_(timeout_s),
      context_(context),
      on_timeout_(std::move(on_timeout)) {}

void Work::wait() {
  if (!advance_) return;
  const auto start = std::chrono::steady_clock::now();
  int spins = 0;
  while (!advance_()) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s_) {
      const std::string message =
          fmt::format("{} did not complete within {:.0f} s at {}: a rank died or never reached it", description_,
                      timeout_s_, context_ != nullptr ? *context_ : "?");
      advance_ = nullptr;
      if (on_timeout_) on_timeout_(message);
      throw RuntimeError(message);
    }
    // Spin briefly (collectives usually finish within microseconds), then yield the core.
    if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  advance_ = nullptr;
}

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

std::unique_ptr<Communicator> make_communicator(MemoryTracker& tracker, const CommOptions& options) {
#ifdef ZT_HAVE_MPI
  if (launched_by_mpi()) return std::make_unique<MpiCommunicator>(tracker, options);
#else
  if (launched_by_mpi()) {
    throw_runtime_error("started by an MPI launcher, but this build has no MPI (install libopenmpi-dev, rebuild)");
  }
#endif
  return std::make_unique<LocalCommunicator>(tracker, options);
}

}  // namespace zt
