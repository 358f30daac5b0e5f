// The maps' registry and the SIGBUS handler (see the header). Everything the handler touches is
// async-signal-safe: lock-free atomics, preformatted bytes, write(2), signal(2), raise(3), _exit,
// and the handler it replaced (Open MPI's, under mpirun), called as is for any other fault.
#include "engine/app/data/mapped_files.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace zt::data {

namespace {

constexpr std::size_t kMessageBytes = 1024;

struct Slot {
  std::atomic<std::uintptr_t> start{0};  // 0: free; written last when filled, first when freed
  std::atomic<std::uintptr_t> end{0};
  char message[kMessageBytes] = {};  // the line the handler writes for a fault in this map
};

std::array<Slot, kMaxMappedFiles> g_slots;
std::mutex g_register_mutex;  // registrations only; the handler reads the atomics
bool g_handler_installed = false;
struct sigaction g_previous {};  // the handler before ours (Open MPI's, for a backtrace), for other faults

extern "C" void on_bus_error(int sig, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<std::uintptr_t>(info != nullptr ? info->si_addr : nullptr);
  for (const Slot& s : g_slots) {
    const std::uintptr_t start = s.start.load();
    if (start != 0 && address >= start && address < s.end.load()) {
      const ssize_t ignored = write(STDERR_FILENO, s.message, std::strlen(s.message));
      (void)ignored;
      _exit(2);
    }
  }
  // Not a token file's: as without this handler.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  std::signal(sig, SIG_DFL);  // ignoring SIGBUS would fault again at once: the default ends it
  std::raise(sig);
}

}  // namespace

void register_mapped_file(const void* start, std::size_t bytes, const std::string& path) {
  const std::lock_guard<std::mutex> lock(g_register_mutex);
  if (!g_handler_installed) {
    struct sigaction action {};
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
    g_handler_installed = true;
  }
  for (Slot& s : g_slots) {
    if (s.start.load() != 0) continue;
    const std::string line = "zerotrain: error: " + path.substr(0, kMessageBytes / 2) +
                             ": the token file changed while this run read it (truncated or rewritten in place; "
                             "it is read through a memory map): write new data under a new name, or stop the run "
                             "first\n";
    std::memcpy(s.message, line.data(), std::min(line.size(), kMessageBytes - 1));
    s.message[std::min(line.size(), kMessageBytes - 1)] = '\0';
    s.end = reinterpret_cast<std::uintptr_t>(start) + bytes;
    s.start = reinterpret_cast<std::uintptr_t>(start);
    return;
  }
}

void unregister_mapped_file(const void* start) {
  const std::lock_guard<std::mutex> lock(g_register_mutex);
  for (Slot& s : g_slots) {
    if (s.start.load() == reinterpret_cast<std::uintptr_t>(start)) s.start = 0;
  }
}

}  // namespace zt::data
