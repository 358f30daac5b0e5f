// Work (polling with a deadline) and the choice of backend.
#include "engine/comm/communicator.h"

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
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

namespace {

// [Note: launcher termination]
// When one rank dies, mpirun terminates the others with SIGTERM, typically long before their
// collective timeout. So that each of them still says what it was doing, Work::wait records the
// collective in flight here, and a SIGTERM handler (installed by the MPI backend) prints it with
// write(2), which is async-signal-safe, before exiting. Two slots: the handler reads the last
// complete one.
constexpr std::size_t kInflightBytes = 512;
char g_inflight[2][kInflightBytes] = {{0}, {0}};
volatile std::sig_atomic_t g_inflight_slot = 0;
volatile std::sig_atomic_t g_inflight_active = 0;  // 0 until the first record

void record(const std::string* description, const std::string* context) {
  const int next = 1 - g_inflight_slot;
  const char* where = context != nullptr ? context->c_str() : "?";
  if (description != nullptr) {
    std::snprintf(g_inflight[next], kInflightBytes,
                  "zerotrain: error: %s was interrupted at %s: the launcher stopped this rank because another rank "
                  "failed or died\n",
                  description->c_str(), where);
  } else {
    std::snprintf(g_inflight[next], kInflightBytes,
                  "zerotrain: error: the launcher stopped this rank at %s (between collectives) because another "
                  "rank failed or died\n",
                  where);
  }
  g_inflight_slot = next;
  g_inflight_active = 1;
}

extern "C" void on_launcher_termination(int) {
  static const char kUnknown[] = "zerotrain: error: the launcher stopped this rank because another rank failed\n";
  const char* text = g_inflight_active ? g_inflight[g_inflight_slot] : kUnknown;
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
  _exit(1);
}

// Only the thread that waits (the main thread) adds to it.
double g_comm_wait_seconds = 0.0;

}  // namespace

double comm_wait_seconds() { return g_comm_wait_seconds; }

void install_launcher_termination_handler() { std::signal(SIGTERM, on_launcher_termination); }

void Communicator::set_context(std::string context) {
  context_ = std::move(context);
  record(nullptr, &context_);
}

void Work::wait() {
  if (!advance_) return;
  record(&description_, context_);
  struct BackToIdle {
    const std::string* context;
    ~BackToIdle() { record(nullptr, context); }
  } back_to_idle{context_};
  const auto start = std::chrono::steady_clock::now();
  struct AddWaitTime {
    std::chrono::steady_clock::time_point start;
    ~AddWaitTime() {
      g_comm_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  } add_wait_time{start};
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
