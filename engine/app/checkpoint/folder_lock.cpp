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

// Whether the holder a lock's JSON names is gone (its lock may be taken over).
bool holder_gone(const nlohmann::json& holder, double age, const std::string& my_host) {
  if (age > FolderLock::kStaleSeconds) return true;  // no heartbeat: dead, hung or a reused pid
  if (holder.value("host", "") != my_host) return false;
  const pid_t pid = holder.value("pid", 0);
  if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) return true;
  // A killed process its parent has not reaped yet (a zombie) still answers kill(pid, 0).
  const std::string stat = read_text(fmt::format("/proc/{}/stat", pid));
  const std::size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
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
      throw_input_error("{} {} is in use by another run: {}; wait for it to end, or give this run another {}", what,
                        folder, describe(holder), run ? "--run-dir" : "checkpoint.dir or --run-dir");
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
    utimensat(AT_FDCWD, path_.c_str(), nullptr, 0);  // the mtime is the heartbeat
  }
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
