// A checkpoint folder, and a run directory, is written by one run at a time. Without it a second
// run started on the folder of a live one trains beside it and overwrites its checkpoints (`latest`
// ends up the second run's); one started in the run directory of a live one (with another
// checkpoint.dir) interleaves its metrics.jsonl, config.json and final weights with the first's.
// The lock is a file in the folder (LOCK in a checkpoint folder, RUN_LOCK in a run directory, so
// a checkpoint folder that is the run directory takes both): JSON naming its holder (host, pid, run
// directory, start time), made by link(2) of a complete temporary file, which either creates it or
// fails because it exists, atomically, also on NFS. A background thread touches it every few
// seconds (its heartbeat). A lock whose holder is gone is taken over: on the same host (and boot and
// pid namespace, which the lock records), a pid that no longer runs or a zombie at once, and past
// kStaleSeconds without a heartbeat another process under the pid (its start ticks differ from
// the lock's) -- a live holder keeps it however old its heartbeat, since a stopped process
// (SIGSTOP, a scheduler's suspend) continues later; from elsewhere (another host on a shared file
// system, another pid namespace), a heartbeat older than kStaleSeconds (clocks assumed within a
// few seconds). Takers
// serialise through a second link-made file, so two never take one lock over together.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace zt::ckpt {

// What a lock guards: its file's name and the words its messages use.
enum class LockedFolder { kCheckpointFolder, kRunDirectory };

// Where another rank, given the token of rank 0's lock on checkpoint folder `folder` (as this
// rank's path reads), finds it: "" when the LOCK there is that one (the folder is the same one,
// shared); otherwise what it finds instead ("no such folder", "no lock file in it", "another lock:
// ..."), for the message that refuses the run before its first step.
std::string find_shared_lock(const std::string& folder, const std::string& token);
// Whether a lock token was made on this host (no network file system's cache between the two then).
bool token_from_this_host(const std::string& token);
// Who holds the lock file `path` while that holder lives (by the rules above), for a reader that
// must not take a live run's files for finished ones; "" without a lock or when its holder is gone.
std::string live_holder(const std::string& path);

class FolderLock {
 public:
  static constexpr double kStaleSeconds = 60.0;
  static constexpr double kHeartbeatSeconds = 5.0;
  // kHeartbeatSeconds, or ZT_TEST_HEARTBEAT_S where a test sets it (docs/config.md, "Testing
  // hooks"), so the tests that wait for beats do not wait 5 s for each.
  static double heartbeat_seconds();

  // Takes `folder`'s lock for this process (creating the folder), or throws InputError naming its
  // holder and what to do. `run_dir` is recorded for the message a second run would get.
  FolderLock(const std::string& folder, const std::string& run_dir,
             LockedFolder kind = LockedFolder::kCheckpointFolder);
  // Stops the heartbeat and removes the lock if it is still this process's.
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  // What taking it found: "" or "took over the lock of ... (gone)".
  const std::string& note() const { return note_; }
  // The lock file's path (<folder>/LOCK or <run dir>/RUN_LOCK).
  const std::string& path() const { return path_; }
  // "" while the lock file is this process's; otherwise who holds it now (another run took it over:
  // this process was stopped or hung past kStaleSeconds, judged gone from another host). Reads the
  // file: the heartbeat asks before each beat, and a saver before each save, so a run that
  // continues never writes beside the taker.
  std::string lost_to() const;
  // The same answer at a step's pace: the heartbeat's finding (it reads the file every few
  // seconds), or a read of the file now where the heartbeat has not confirmed the lock for two of
  // its beats (this process was stopped or starved, when a takeover happens). A lock found lost
  // stays lost, also after its taker has ended and removed it.
  std::string lost_now() const;
  // What names this process's hold in the lock file ("host:pid:start").
  const std::string& token() const { return token_; }
  // The folder the lock is in, as given, and which kind it is.
  const std::string& folder() const { return dir_; }
  LockedFolder kind() const { return kind_; }
  // Whether the folder itself was moved or removed while held: its path names no folder now, or
  // another one (made again under the name). Sticky. moved_now() looks now (a stat); moved_seen()
  // answers from the heartbeat, which looks at every beat, at a step's pace. The heartbeat makes a
  // removed checkpoint folder again (and its lock: saves go on there), never a run directory, whose
  // open metrics.jsonl went with it (the run ends: its trainer asks at every step).
  bool moved_now() const;
  bool moved_seen() const { return moved_.load(); }

 private:
  void beat();

  std::string path_, token_, note_;
  std::string text_, temp_;  // the lock file's contents, and the temporary name it is made under
  mutable std::mutex lost_mutex_;
  mutable std::string lost_holder_;         // who took the lock over, once seen; "" while it is this process's
  std::atomic<std::int64_t> confirmed_ns_;  // steady clock: when the heartbeat last found the lock its own
  std::string registered_folder_;           // a checkpoint folder's, as registered for check_folder_lock_still_held
  std::string dir_;                         // the folder, as given
  LockedFolder kind_ = LockedFolder::kCheckpointFolder;
  std::uint64_t dir_device_ = 0, dir_inode_ = 0;  // the folder's identity when the lock was taken
  mutable std::atomic<bool> moved_{false};
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

// Where a save commits (rank 0, just before the rename into place): throws RuntimeError when this
// process holds `folder`'s checkpoint-folder lock and another run has taken it over since, so a
// save under way while the process was stopped never lands beside the taker's. Nothing when this
// process holds no lock on the folder (tools and tests that save without one).
void check_folder_lock_still_held(const std::string& folder);

}  // namespace zt::ckpt
