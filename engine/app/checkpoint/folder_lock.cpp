// The checkpoint folder's lock (see the header).
#include "engine/app/checkpoint/folder_lock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return in ? s.str() : std::string();
}

// Seconds since the file's last heartbeat (its mtime), or a negative value when it is gone.
double heartbeat_age(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1.0;
  const auto mtime = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec) +
                                                           std::chrono::nanoseconds(st.st_mtim.tv_nsec));
  return std::chrono::duration<double>(std::chrono::system_clock::now() - mtime).count();
}

// A process's /proc/PID/stat fields after its name (which may hold spaces and parentheses):
// fields[0] is the state (R, S, T, Z, ...), fields[19] the start time in clock ticks after boot.
std::vector<std::string> process_stat(pid_t pid) {
  const std::string stat = read_text(fmt::format("/proc/{}/stat", pid));
  const std::size_t paren = stat.rfind(')');
  std::vector<std::string> fields;
  if (paren == std::string::npos) return fields;
  std::istringstream rest(stat.substr(paren + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// When a process started, in seconds since the epoch (to a clock tick, after a boot time of whole
// seconds), or a negative value when unknown.
double process_start_unix(const std::vector<std::string>& fields) {
  if (fields.size() < 20) return -1.0;
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key != "btime") continue;
    double boot = 0.0;
    in >> boot;
    return boot + std::stod(fields[19]) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return -1.0;
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// Whether the holder a lock's JSON names is gone (its lock may be taken over). On this host, its
// pid decides: a process that no longer runs, a zombie, or one started after the lock was taken
// (the pid reused) is gone; a live one holds it even with a stale heartbeat (stopped by SIGSTOP or
// a scheduler's suspend, it continues later and would write beside a taker). From another host
// only the heartbeat tells.
bool holder_gone(const nlohmann::json& holder, double age, const std::string& my_host) {
  if (holder.value("host", "") != my_host) return age > FolderLock::kStaleSeconds;
  const pid_t pid = holder.value("pid", 0);
  if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) return true;
  const std::vector<std::string> fields = process_stat(pid);
  if (!fields.empty() && fields[0] == "Z") return true;  // killed, not yet reaped: still answers kill(pid, 0)
  const double locked_at = holder.value("started_unix", -1.0);
  if (locked_at < 0.0) return age > FolderLock::kStaleSeconds;  // a lock from before started_unix: as then
  const double started = process_start_unix(fields);
  return started > locked_at + 2.0;  // a later process under the same pid (boot time is whole seconds)
}

// Why a live holder's heartbeat stopped, for the refusal: "" while it beats.
std::string stale_holder_hint(const nlohmann::json& holder, double age) {
  if (age <= FolderLock::kStaleSeconds) return "";
  const pid_t pid = holder.value("pid", 0);
  const std::vector<std::string> fields = process_stat(pid);
  const bool stopped = !fields.empty() && (fields[0] == "T" || fields[0] == "t");
  return fmt::format(" (its heartbeat is {:.0f} s old: the process is {}; continue it with kill -CONT {} or end it)",
                     age, stopped ? "stopped" : "alive but not beating, hung or starved", pid);
}

std::string describe(const nlohmann::json& holder) {
  return fmt::format("pid {} on host {} since {} (run directory {})", holder.value("pid", 0), holder.value("host", "?"),
                     holder.value("started", "?"), holder.value("run_dir", "?"));
}

// Creates `path` holding `text`, failing (false) when it exists: link(2) of a complete file.
bool create_exclusive(const std::string& path, const std::string& text, const std::string& temp) {
  write_file_atomically(temp, text);
  const bool made = link(temp.c_str(), path.c_str()) == 0;
  const int err = errno;
  unlink(temp.c_str());
  if (!made && err != EEXIST) throw_input_error("cannot create the lock {}: {}", path, std::strerror(err));
  return made;
}

}  // namespace

FolderLock::FolderLock(const std::string& folder, const std::string& run_dir, LockedFolder kind) {
  const bool run = kind == LockedFolder::kRunDirectory;
  const char* what = run ? "run directory" : "checkpoint folder";
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw_input_error("cannot create {} '{}': {}", what, folder, ec.message());
  path_ = (fs::path(folder) / (run ? "RUN_LOCK" : "LOCK")).string();
  const std::string host = host_name();
  const auto now = std::chrono::system_clock::now();
  token_ = fmt::format("{}:{}:{}", host, getpid(), now.time_since_epoch().count());
  const nlohmann::json mine = {{"host", host},
                               {"pid", getpid()},
                               {"run_dir", run_dir},
                               {"started", fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", fmt::gmtime(now))},
                               {"started_unix", unix_now()},
                               {"token", token_}};
  const std::string temp = fmt::format("{}.{}.{}.tmp", path_, host, getpid());
  const std::string takeover = path_ + ".takeover";
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (create_exclusive(path_, mine.dump() + "\n", temp)) break;
    const std::string text = read_text(path_);
    const nlohmann::json holder = nlohmann::json::parse(text, nullptr, false);
    const double age = heartbeat_age(path_);
    if (age < 0.0) continue;  // released meanwhile: try again
    if (holder.is_object() && !holder_gone(holder, age, host)) {
      throw_input_error("{} {} is in use by another run: {}{}; wait for it to end, or give this run another {}", what,
                        folder, describe(holder), stale_holder_hint(holder, age),
                        run ? "--run-dir" : "checkpoint.dir or --run-dir");
    }
    // Gone (or unreadable: a lock this code never writes). Take it over, one taker at a time.
    if (!create_exclusive(takeover, mine.dump() + "\n", temp + ".takeover")) {
      if (heartbeat_age(takeover) > kStaleSeconds) unlink(takeover.c_str());  // a taker that died in it
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (read_text(path_) == text) {  // still the lock judged gone
      unlink(path_.c_str());
      note_ = fmt::format("took over the {}'s lock from {}, gone", what, describe(holder));
    }
    unlink(takeover.c_str());
  }
  if (read_text(path_).find(token_) == std::string::npos) {
    throw_input_error("{} {}: could not take its lock (another run is taking it over)", what, folder);
  }
  heartbeat_ = std::thread([this] { beat(); });
}

void FolderLock::beat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_cv_.wait_for(lock, std::chrono::duration<double>(kHeartbeatSeconds), [this] { return stop_; })) {
    if (!lost_to().empty()) continue;                // taken over: never beat another run's lock
    utimensat(AT_FDCWD, path_.c_str(), nullptr, 0);  // the mtime is the heartbeat
  }
}

std::string FolderLock::lost_to() const {
  const std::string text = read_text(path_);
  if (text.find(token_) != std::string::npos) return "";
  const nlohmann::json holder = nlohmann::json::parse(text, nullptr, false);
  return holder.is_object() ? describe(holder) : "nobody (its lock file is gone)";
}

FolderLock::~FolderLock() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (read_text(path_).find(token_) != std::string::npos) unlink(path_.c_str());
}

}  // namespace zt::ckpt
