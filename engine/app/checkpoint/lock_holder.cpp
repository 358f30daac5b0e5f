// Who holds a folder's lock (see the header).
#include "engine/app/checkpoint/lock_holder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <limits>
#include <sstream>
#include <vector>

#include "engine/app/checkpoint/folder_lock.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

// A process's /proc/PID/stat fields after its name (which may hold spaces and parentheses):
// fields[0] is the state (R, S, T, Z, ...), fields[19] the start time in clock ticks after boot.
std::vector<std::string> process_stat(pid_t pid) {
  const std::string stat = read_lock_text(fmt::format("/proc/{}/stat", pid));
  const std::size_t paren = stat.rfind(')');
  std::vector<std::string> fields;
  if (paren == std::string::npos) return fields;
  std::istringstream rest(stat.substr(paren + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// A lock's fields as this code writes them, read without throwing: a field of another type (a lock
// this code never wrote, or a damaged one) reads as absent, so that the lock is judged, never the
// JSON library's type error printed (a RUN_LOCK of {"host": 1} ended train with it).
std::string text_field(const nlohmann::json& holder, const char* key, const std::string& absent = "") {
  const auto it = holder.find(key);
  return it != holder.end() && it->is_string() ? it->get<std::string>() : absent;
}

// The text fields a lock holds (older versions wrote fewer of them).
constexpr const char* kTextFields[] = {"host",    "started",       "run_dir", "start_ticks",
                                       "boot_id", "pid_namespace", "folder",  "token"};

// The pid, or 0 (no process) where it is no integer in pid_t's range: a float of 1e300 converted
// to pid_t was undefined behaviour.
pid_t pid_field(const nlohmann::json& holder) {
  const auto it = holder.find("pid");
  if (it == holder.end() || !it->is_number_integer()) return 0;
  if (it->is_number_unsigned()) {
    const auto pid = it->get<std::uint64_t>();
    return pid <= static_cast<std::uint64_t>(std::numeric_limits<pid_t>::max()) ? static_cast<pid_t>(pid) : 0;
  }
  const auto pid = it->get<std::int64_t>();
  return pid > 0 && pid <= std::numeric_limits<pid_t>::max() ? static_cast<pid_t>(pid) : 0;
}

// Whether the lock's JSON is one this code writes: an object naming a pid, its text fields text.
bool fields_as_written(const nlohmann::json& holder) {
  return holder.is_object() && pid_field(holder) > 0 &&
         std::all_of(std::begin(kTextFields), std::end(kTextFields),
                     [&](const char* key) { return !holder.contains(key) || holder[key].is_string(); });
}

}  // namespace

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

std::string read_lock_text(const std::string& path) {
  constexpr std::size_t kMaxLockBytes = 1 << 16;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::string();
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    text.resize(kMaxLockBytes);
    std::size_t got = 0;
    for (ssize_t n = 0; got < kMaxLockBytes; got += static_cast<std::size_t>(n)) {
      n = ::read(fd, text.data() + got, kMaxLockBytes - got);
      if (n < 0 && errno == EINTR) {
        n = 0;
        continue;
      }
      if (n <= 0) break;
    }
    text.resize(got);
  }
  ::close(fd);
  return text;
}

double heartbeat_age(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1.0;
  const auto mtime = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec) +
                                                           std::chrono::nanoseconds(st.st_mtim.tv_nsec));
  return std::chrono::duration<double>(std::chrono::system_clock::now() - mtime).count();
}

ProcessIdentity own_identity() {
  ProcessIdentity id;
  const std::vector<std::string> fields = process_stat(getpid());
  if (fields.size() > 19) id.start_ticks = fields[19];
  id.boot_id = read_lock_text("/proc/sys/kernel/random/boot_id");
  while (!id.boot_id.empty() && id.boot_id.back() == '\n') id.boot_id.pop_back();
  std::error_code ec;
  id.pid_namespace = fs::read_symlink("/proc/self/ns/pid", ec).string();
  return id;
}

bool holder_gone(const nlohmann::json& holder, double age, const std::string& my_host) {
  if (!fields_as_written(holder)) return true;  // no run's lock: nobody holds it
  const bool stale = age > FolderLock::kStaleSeconds;
  if (text_field(holder, "host") != my_host) return stale;
  const ProcessIdentity mine = own_identity();
  // A lock from before the identity was recorded: its pid taken to be this namespace's, as then.
  const bool same_space =
      !holder.contains("boot_id") || (!mine.boot_id.empty() && text_field(holder, "boot_id") == mine.boot_id &&
                                      text_field(holder, "pid_namespace") == mine.pid_namespace);
  const pid_t pid = pid_field(holder);
  if (same_space && kill(pid, 0) != 0 && errno == ESRCH) return true;  // pid > 0: fields_as_written
  const std::vector<std::string> fields = same_space ? process_stat(pid) : std::vector<std::string>{};
  if (!fields.empty() && fields[0] == "Z") return true;  // killed, not yet reaped: still answers kill(pid, 0)
  // The pid now another process's (its start ticks differ): the holder is gone, however fresh its
  // lock's time (it died within the minute and its pid was given again).
  const std::string recorded = text_field(holder, "start_ticks");
  if (!recorded.empty() && fields.size() > 19 && fields[19] != recorded) return true;
  if (!stale) return false;
  return recorded.empty() || fields.size() <= 19;
}

std::string stale_holder_hint(const nlohmann::json& holder, double age) {
  if (age <= FolderLock::kStaleSeconds) return "";
  const pid_t pid = pid_field(holder);
  const std::vector<std::string> fields = process_stat(pid);
  const bool stopped = !fields.empty() && (fields[0] == "T" || fields[0] == "t");
  return fmt::format(" (its heartbeat is {:.0f} s old: the process is {}; continue it with kill -CONT {} or end it)",
                     age, stopped ? "stopped" : "alive but not beating, hung or starved", pid);
}

std::string folder_identity(const std::string& folder) {
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) return "";
  return fmt::format("{}:{}", static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino));
}

bool lock_of_another_folder(const nlohmann::json& holder, const std::string& folder, const std::string& my_host,
                            double age) {
  const ProcessIdentity mine = own_identity();
  const std::string copied_from = text_field(holder, "folder");
  if (copied_from.empty() || text_field(holder, "host") != my_host || mine.boot_id.empty() ||
      text_field(holder, "boot_id") != mine.boot_id || text_field(holder, "pid_namespace") != mine.pid_namespace) {
    return false;
  }
  // A copy never beats: one whose time moved within three beats is its holder's own lock (the same
  // folder mounted twice numbers its device twice; a folder replaced by its copy under a live run).
  if (age < 3 * FolderLock::heartbeat_seconds()) return false;
  const std::string here = folder_identity(folder);
  return !here.empty() && copied_from != here;
}

std::string describe_holder(const nlohmann::json& holder) {
  if (!holder.is_object()) return "nobody readable (the lock file is empty or not JSON)";
  if (!fields_as_written(holder)) return "another run (the lock file's fields are not this program's)";
  return fmt::format("pid {} on host {} since {} (run directory {})", pid_field(holder),
                     text_field(holder, "host", "?"), text_field(holder, "started", "?"),
                     text_field(holder, "run_dir", "?"));
}

}  // namespace zt::ckpt
