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
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/checkpoint/lock_holder.h"
#include "engine/app/io/input_file.h"
#include "engine/app/io/output_file.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Creates `path` holding `text`, failing (false) when it exists: link(2) of a complete file.
bool create_exclusive(const std::string& path, const std::string& text, const std::string& temp) {
  try {
    write_file_atomically(temp, text);
  } catch (const std::exception& e) {  // a full disk: named by the lock, not its staging file's staging file
    throw_runtime_error("cannot create the lock {}: {}", path, e.what());
  }
  const bool made = link(temp.c_str(), path.c_str()) == 0;
  const int err = errno;
  unlink(temp.c_str());
  if (!made && err != EEXIST) throw_input_error("cannot create the lock {}: {}", path, std::strerror(err));
  return made;
}

// The checkpoint-folder locks this process holds, by folder (as made canonical), for
// check_folder_lock_still_held.
std::mutex held_mutex;
std::map<std::string, const FolderLock*>& held_locks() {
  static std::map<std::string, const FolderLock*> locks;
  return locks;
}

std::string canonical_folder(const std::string& folder) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(folder), ec);
  return ec ? folder : p.string();
}

// The staging files of the lock at `lock_path` that a taker killed while making it left
// (LOCK.<host>.<pid>.tmp, its own .tmp, its .takeover forms), removed once the caller holds the
// lock. By age, not by pid: a taker links its staging file within milliseconds, so one older than
// kStaleSeconds is no live taker's, whichever host or container (a pid says nothing across pid
// namespaces, nor across hosts sharing the folder).
void remove_abandoned_staging(const std::string& lock_path) {
  const fs::path lock(lock_path);
  const std::string prefix = lock.filename().string() + ".";
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const fs::directory_entry& e : fs::directory_iterator(lock.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const bool staging = name.ends_with(".tmp") || name.ends_with(".tmp.tmp") || name.ends_with(".tmp.takeover") ||
                         name.ends_with(".tmp.takeover.tmp");
    if (!staging || name == lock.filename().string() + ".takeover") continue;
    std::error_code time_ec;
    const auto written = fs::last_write_time(e.path(), time_ec);
    if (time_ec || now - written < std::chrono::duration<double>(FolderLock::kStaleSeconds)) continue;
    std::error_code removed;
    fs::remove(e.path(), removed);
  }
}

}  // namespace

void check_folder_lock_still_held(const std::string& folder) {
  const std::lock_guard<std::mutex> lock(held_mutex);
  const auto it = held_locks().find(canonical_folder(folder));
  if (it == held_locks().end()) return;
  if (const std::string taken = it->second->lost_to(); !taken.empty()) {
    throw_runtime_error(
        "the lock of {} now belongs to {}, which took it over while this run was stopped or hung; this save is "
        "not committed beside its checkpoints",
        folder, taken);
  }
}

std::string find_shared_lock(const std::string& folder, const std::string& token) {
  // The file opened first: on NFS an open revalidates its name, where a stat of the folder may be
  // answered from a cache made before rank 0 created it.
  const std::string text = read_lock_text((fs::path(folder) / "LOCK").string());
  std::error_code ec;
  if (text.empty()) return fs::is_directory(folder, ec) ? "no lock file in it" : "no such folder";
  if (text.find(token) != std::string::npos) return "";
  return "another lock: " + describe_holder(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false));
}

bool token_from_this_host(const std::string& token) { return token.starts_with(host_name() + ":"); }

std::string live_holder(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return "";  // none, or no lock this code writes (a FIFO's read would wait)
  const std::string text = read_lock_text(path);
  if (text.empty()) return "";
  const nlohmann::json holder = nlohmann::json::parse(text, nullptr, false);
  if (holder_gone(holder, heartbeat_age(path), host_name())) return "";
  return describe_holder(holder);
}

FolderLock::FolderLock(const std::string& folder, const std::string& run_dir, LockedFolder kind) {
  const bool run = kind == LockedFolder::kRunDirectory;
  const char* what = run ? "run directory" : "checkpoint folder";
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw_input_error("cannot create {} '{}': {}", what, folder, ec.message());
  // Named here, not through the lock's temporary file that could not be made.
  if (const std::string why = why_unwritable(folder); !why.empty()) {
    throw_input_error("{} {} cannot be written: {}", what, folder, why);
  }
  path_ = (fs::path(folder) / (run ? "RUN_LOCK" : "LOCK")).string();
  const std::string host = host_name();
  const auto now = std::chrono::system_clock::now();
  token_ = fmt::format("{}:{}:{}", host, getpid(), now.time_since_epoch().count());
  const ProcessIdentity identity = own_identity();
  const nlohmann::json mine = {{"host", host},
                               {"pid", getpid()},
                               {"run_dir", run_dir},
                               {"started", fmt::format("{:%Y-%m-%d %H:%M:%S} UTC", fmt::gmtime(now))},
                               {"start_ticks", identity.start_ticks},
                               {"boot_id", identity.boot_id},
                               {"pid_namespace", identity.pid_namespace},
                               {"folder", folder_identity(folder)},
                               {"token", token_}};
  text_ = mine.dump() + "\n";
  temp_ = fmt::format("{}.{}.{}.tmp", path_, host, getpid());
  const std::string takeover = path_ + ".takeover";
  // Something other than a file where the lock or its takeover lies (a FIFO, a directory, a link to a
  // device): no run's lock, and not this code's to remove.
  for (const std::string& p : {path_, takeover}) {
    require_regular_file(p, fmt::format("{} {}'s lock", what, folder));
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (create_exclusive(path_, text_, temp_)) break;
    const std::string text = read_lock_text(path_);
    const nlohmann::json holder = nlohmann::json::parse(text, nullptr, false);
    const double age = heartbeat_age(path_);
    if (age < 0.0) continue;  // released meanwhile: try again
    const bool copy = lock_of_another_folder(holder, folder, host, age);
    if (!copy && !holder_gone(holder, age, host)) {
      throw_input_error("{} {} is in use by another run: {}{}; wait for it to end, or give this run another {}", what,
                        folder, describe_holder(holder), stale_holder_hint(holder, age),
                        run ? "--run-dir" : "checkpoint.dir or --run-dir");
    }
    // Gone (or unreadable: a lock this code never writes). Take it over, one taker at a time.
    if (!create_exclusive(takeover, text_, temp_ + ".takeover")) {
      // A taker that died in it: its pid gone at once (on this host), or its file a minute old.
      const nlohmann::json taker = nlohmann::json::parse(read_lock_text(takeover), nullptr, false);
      const double taker_age = heartbeat_age(takeover);
      if (taker_age > kStaleSeconds || holder_gone(taker, taker_age, host)) unlink(takeover.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (read_lock_text(path_) == text) {  // still the lock judged gone
      unlink(path_.c_str());
      note_ = copy ? fmt::format("took over the {}'s lock, a copy of another folder's lock ({}) made with the folder",
                                 what, describe_holder(holder))
                   : fmt::format("took over the {}'s lock from {}, gone", what, describe_holder(holder));
    }
    unlink(takeover.c_str());
  }
  if (read_lock_text(path_).find(token_) == std::string::npos) {
    const nlohmann::json taker = nlohmann::json::parse(read_lock_text(takeover), nullptr, false);
    throw_input_error("{} {}: could not take its lock (another run is taking it over: {}, in {})", what, folder,
                      taker.is_object() ? describe_holder(taker) : std::string("its file is gone or unreadable"),
                      takeover);
  }
  remove_abandoned_staging(path_);
  dir_ = folder;
  kind_ = kind;
  struct stat st {};
  if (::stat(folder.c_str(), &st) == 0) {
    dir_device_ = static_cast<std::uint64_t>(st.st_dev);
    dir_inode_ = static_cast<std::uint64_t>(st.st_ino);
  }
  confirmed_ns_ = steady_now_ns();
  heartbeat_ = std::thread([this] { beat(); });
  if (!run) {
    registered_folder_ = canonical_folder(folder);
    const std::lock_guard<std::mutex> lock(held_mutex);
    held_locks()[registered_folder_] = this;
  }
}

double FolderLock::heartbeat_seconds() {
  static const double seconds = [] {
    const char* hook = std::getenv("ZT_TEST_HEARTBEAT_S");
    const double value = hook != nullptr ? std::atof(hook) : 0.0;
    return value > 0.0 ? value : kHeartbeatSeconds;
  }();
  return seconds;
}

void FolderLock::beat() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::chrono::duration<double> period(heartbeat_seconds());
  while (!stop_cv_.wait_for(lock, period, [this] { return stop_; })) {
    if (!lost_to().empty()) continue;  // taken over: never beat another run's lock
    confirmed_ns_ = steady_now_ns();
    // A run directory moved away took the run's log with it: not made again (the run ends).
    if (moved_now() && kind_ == LockedFolder::kRunDirectory) continue;
    if (utimensat(AT_FDCWD, path_.c_str(), nullptr, 0) != 0 && errno == ENOENT) {  // the mtime is the heartbeat
      // The lock file (or its folder) removed under the run, by hand: made again, so that a second
      // run is still refused while this one holds the folder (exclusively: where another run made
      // its own meanwhile, lost_to names it at the next beat). The folder alone, not its parents:
      // a checkpoint folder inside a run directory moved away is not made again under the old name.
      std::error_code ec;
      fs::create_directory(fs::path(path_).parent_path(), ec);
      // The folder made again is another inode: the lock names it, not the removed one (else a second
      // run took it for a copy of another folder's lock and took it over).
      nlohmann::json mine = nlohmann::json::parse(text_, nullptr, /*allow_exceptions=*/false);
      if (mine.is_object()) {
        mine["folder"] = folder_identity(fs::path(path_).parent_path().string());
        text_ = mine.dump() + "\n";
      }
      try {
        create_exclusive(path_, text_, temp_);
      } catch (const std::exception&) {  // no room or no right: the next beat tries again
      }
    }
  }
}

bool FolderLock::moved_now() const {
  if (moved_.load()) return true;
  if (dir_inode_ == 0) return false;  // its identity could not be read when taken: nothing to compare
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0) {
    // Gone only where the name is; another failure (a network file system's transient one) says
    // nothing about the folder, and must not end a run.
    if (errno != ENOENT && errno != ENOTDIR) return false;
  } else if (static_cast<std::uint64_t>(st.st_dev) == dir_device_ &&
             static_cast<std::uint64_t>(st.st_ino) == dir_inode_) {
    return false;
  }
  moved_ = true;  // gone, or another folder under its name
  return true;
}

std::string FolderLock::lost_to() const {
  {
    const std::lock_guard<std::mutex> lock(lost_mutex_);
    if (!lost_holder_.empty()) return lost_holder_;
  }
  // Lost only to a lock file that names another holder: one that cannot be read (gone, a transient
  // error) is not taken to be another run's.
  const std::string text = read_lock_text(path_);
  if (text.empty() || text.find(token_) != std::string::npos) return "";
  const nlohmann::json holder = nlohmann::json::parse(text, nullptr, false);
  if (!holder.is_object() || !holder.value("token", nlohmann::json()).is_string()) return "";
  const std::string taker = describe_holder(holder);
  const std::lock_guard<std::mutex> lock(lost_mutex_);
  lost_holder_ = taker;
  return taker;
}

std::string FolderLock::lost_now() const {
  // steady_clock runs on while the process is stopped, so a continued process reads the file here
  // before the heartbeat thread (woken at the same moment) has looked.
  const double unconfirmed = static_cast<double>(steady_now_ns() - confirmed_ns_.load()) * 1e-9;
  if (unconfirmed > 2.0 * heartbeat_seconds()) return lost_to();
  const std::lock_guard<std::mutex> lock(lost_mutex_);
  return lost_holder_;  // what the heartbeat found
}

FolderLock::~FolderLock() {
  if (!registered_folder_.empty()) {
    const std::lock_guard<std::mutex> lock(held_mutex);
    held_locks().erase(registered_folder_);
  }
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (read_lock_text(path_).find(token_) != std::string::npos) unlink(path_.c_str());
}

}  // namespace zt::ckpt
