// Staging names for outputs written whole (see the header).
#include "engine/app/io/output_file.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <mutex>
#include <vector>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/io/flock_holders.h"
#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"
#include "engine/distributed/launch/signals.h"

namespace zt {

std::string keep_aside(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) == 0 || ec) return "";
  const std::filesystem::path p(ckpt::rename_target(path, what));
  const std::string stamp = fmt::format("{:%Y%m%d-%H%M%S}", fmt::gmtime(std::time(nullptr)));
  std::string aside;
  for (int n = 0; aside.empty() || std::filesystem::exists(aside, ec); ++n) {
    aside = (p.parent_path() / fmt::format("{}.{}{}{}", p.stem().string(), stamp, n > 0 ? fmt::format("-{}", n) : "",
                                           p.extension().string()))
                .string();
  }
  std::filesystem::rename(p, aside, ec);
  if (ec) throw_runtime_error("cannot set the earlier {} '{}' aside: {}", what, p.string(), ec.message());
  return aside;
}

std::string why_unwritable(const std::string& dir) {
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return std::strerror(errno);
  static std::atomic<int> probes{0};
  const std::string probe =
      (std::filesystem::path(dir) / fmt::format(".zt_write_probe.{}.{}", getpid(), probes++)).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno == EEXIST ? "" : fmt::format("no file can be created there ({})", std::strerror(errno));
  ::close(fd);
  // A folder that takes files but lets none go (append-only) fails a run's renames and clean-ups later.
  if (::unlink(probe.c_str()) != 0) {
    return fmt::format("a file made there cannot be removed ({}; {} is left)", std::strerror(errno), probe);
  }
  return "";
}

void check_output_path(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  require_regular_file(path, what);  // where it exists: a directory, a FIFO, a device named as such
  // No file name ("", "runs/"): the work was done, then its rename failed naming ".tmp".
  if (std::filesystem::path(path).filename().empty()) throw_input_error("{} '{}': not a file name", what, path);
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(parent, ec)) throw_input_error("{} {}: no folder {}", what, path, parent.string());
  if (const std::string why = why_unwritable(parent.string()); !why.empty()) {
    throw_input_error("{} {}: cannot write into {}: {}", what, path, parent.string(), why);
  }
}

namespace {

// `path` with `suffix` on its name, which is cut to fit NAME_MAX where it would not: distinct
// targets sharing a long prefix keep distinct names (the hash of the whole name).
std::string suffixed_path(const std::string& path, std::string_view suffix) {
  const std::filesystem::path p(path);
  const std::string name = p.filename().string();
  if (name.size() + suffix.size() <= NAME_MAX) return path + std::string(suffix);
  const std::string hash = fmt::format("-{:016x}", std::hash<std::string>{}(name));
  const std::string short_name = name.substr(0, NAME_MAX - hash.size() - suffix.size()) + hash + std::string(suffix);
  return (p.parent_path() / short_name).string();
}

// Where StagedFiles::commit keeps an earlier output's file until the new output is whole.
std::string replaced_name(const std::string& path) { return suffixed_path(path, kReplacedSuffix); }

}  // namespace

std::string staging_path(const std::string& path) { return suffixed_path(path, ".tmp"); }

namespace {

// The registry a signal handler reads: lock-free slots of paths, each a copy never freed (a handler
// never reads a freed one) whose first byte says what it is ('f' a file, 'd' a folder).
constexpr int kPartialSlots = 64;
std::atomic<const char*> g_partial[kPartialSlots];
static_assert(std::atomic<const char*>::is_always_lock_free);

// Every copy stays listed here until the process ends: never freed, but held (LeakSanitizer counts
// what a static reaches as held, not lost, so a sanitized export or prepare exits as it would).
std::vector<const char*>& kept_copies() {
  static auto* copies = new std::vector<const char*>;
  return *copies;
}
std::mutex g_kept_copies_mutex;

extern "C" void remove_partial_outputs_and_end(int sig) {
  for (const char kind : {'f', 'd'}) {  // files first, so that the folders are empty
    for (auto& slot : g_partial) {
      const char* entry = slot.load();
      if (entry == nullptr || entry[0] != kind) continue;
      if (kind == 'd') {
        rmdir(entry + 1);  // only an empty one
      } else {
        unlink(entry + 1);
      }
    }
  }
  std::signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

PartialOutput::PartialOutput(const std::string& path, bool folder) : slot_(-1) {
  const char* copy = strdup(fmt::format("{}{}", folder ? 'd' : 'f', path).c_str());
  if (copy != nullptr) {
    const std::lock_guard<std::mutex> lock(g_kept_copies_mutex);
    kept_copies().push_back(copy);
  }
  for (int i = 0; i < kPartialSlots && copy != nullptr; ++i) {
    const char* empty = nullptr;
    if (g_partial[i].compare_exchange_strong(empty, copy)) {
      slot_ = i;
      return;
    }
  }
}

PartialOutput::~PartialOutput() {
  if (slot_ >= 0) g_partial[slot_] = nullptr;  // the copy stays: a handler may be reading it
}

void remove_partial_outputs_on_signal() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    if (!signal_ignored(sig)) std::signal(sig, remove_partial_outputs_and_end);  // nohup's stays ignored
  }
}

StagedFiles::~StagedFiles() {
  for (const Staged& f : staged_) std::remove(f.tmp.c_str());  // those not committed
}

void StagedFiles::lock_folder(const std::string& dir, std::string_view what) {
  if (!ckpt::FileHandle::hold_exclusive(dir, folder_)) {
    const std::string held = flock_holders_note(dir);
    throw_input_error(
        "{} {}: another zerotrain command is writing into it, or a run training from it, now{}; try again once "
        "it ends",
        what, dir, held.empty() ? "" : "; it is held" + held);
  }
}

std::string StagedFiles::stage(const std::string& path) {
  const std::string tmp = staging_path(path);
  // Registered before it exists, so a signal once it does removes it.
  auto partial = std::make_unique<PartialOutput>(tmp);
  ckpt::FileHandle held;
  if (!ckpt::FileHandle::hold_exclusive(tmp, held, /*create=*/true)) {
    throw_input_error(
        "{}: another zerotrain command is writing it now (its staging file {} is held{}); try again "
        "once it ends",
        path, tmp, flock_holders_note(tmp));
  }
  staged_.push_back({tmp, path, std::move(partial), std::move(held)});
  return tmp;
}

void StagedFiles::commit(const std::string& dir, const std::vector<std::string>& remove_first) {
  const char* hook = std::getenv("ZT_TEST_EXPORT_EXIT_AFTER_RENAMES");
  int renames_left = hook != nullptr ? std::atoi(hook) : -1;
  // ZT_TEST_EXPORT_FAIL_AFTER_RENAMES=n: the rename after n of them fails (EIO), as a file system
  // fault there would, which the commit puts back.
  const char* fail_hook = std::getenv("ZT_TEST_EXPORT_FAIL_AFTER_RENAMES");
  int renames_before_failure = fail_hook != nullptr ? std::atoi(fail_hook) : -1;
  // Each file's bytes on disk before its name: a power loss after the renames must not leave an
  // empty or partial file under a name the folder's other files agree with (a copied vocab.json
  // was never synced).
  for (const Staged& f : staged_) {
    const int fd = ::open(f.tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      throw_runtime_error("cannot sync '{}' to disk: {}", f.tmp, std::strerror(err));
    }
    ::close(fd);
  }
  // The renames are not cut by a Ctrl-C (which would leave old and new files mixed): the signals
  // wait until they are done, when nothing partial is left to remove.
  sigset_t stops, before;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, sig);
  pthread_sigmask(SIG_BLOCK, &stops, &before);
  struct Unblock {
    const sigset_t& before;
    ~Unblock() { pthread_sigmask(SIG_SETMASK, &before, nullptr); }
  } unblock{before};
  // An output replaced in several steps is marked incomplete until the last one: a cut between
  // them (a kill) leaves the marker, which the writer's next run and the output's readers know it
  // by, whatever that run then stages or removes of its own.
  const std::string folder = dir.empty() ? "." : dir;
  const std::string marker = (std::filesystem::path(folder) / kIncompleteOutputMarker).string();
  const bool marked = !remove_first.empty() || staged_.size() > 1;
  std::error_code gone;
  const bool was_marked = std::filesystem::exists(marker, gone);  // an earlier cut's: kept where this one fails
  // Until the new output is whole, the earlier one's files are kept under NAME.zt-replaced: each
  // file a staged one replaces as a second link (its name keeps it until the rename replaces it
  // in one step), each of remove_first's moved there (gone from its name before the first rename).
  // A failure on the way (a file that will not move, a rename refused) puts each back, so the
  // destination is as it was. One file replacing its earlier self is one rename: nothing is kept.
  // A directory in the way is refused before anything moves.
  std::vector<std::string> replaced = remove_first;
  for (const Staged& f : staged_) {
    if (std::find(replaced.begin(), replaced.end(), f.path) == replaced.end()) replaced.push_back(f.path);
  }
  for (const std::string& path : replaced) {
    std::error_code ec;
    if (std::filesystem::is_directory(std::filesystem::symlink_status(path, ec))) {
      throw_runtime_error("cannot replace '{}': it is a directory", path);
    }
  }
  if (marked) {
    ckpt::write_file_synced(marker,
                            "an output being replaced here was cut before it was whole: run its command again\n");
    ckpt::sync_dir(folder);
  }
  std::vector<std::string> kept, renamed;  // earlier files kept aside; staged files on their names
  const auto fail = [&](const std::string& what) {
    bool restored = true;
    for (const std::string& path : renamed) {  // a new file with no earlier one off its name
      if (std::find(kept.begin(), kept.end(), path) == kept.end()) restored &= std::remove(path.c_str()) == 0;
    }
    std::vector<std::string> left;
    for (const std::string& path : kept) {  // back over the new file, or onto its own link (no change)
      std::error_code ec;
      std::filesystem::rename(replaced_name(path), path, ec);
      if (!ec) std::remove(replaced_name(path).c_str());  // the second link, where it was one
      if (ec) left.push_back(replaced_name(path));
      restored &= !ec;
    }
    if (restored && marked && !was_marked) std::remove(marker.c_str());
    throw_runtime_error("{}{}", what,
                        restored ? " (the earlier output is back in place)"
                                 : fmt::format(" (the earlier output could not be put back whole: its files are {}; "
                                               "{} marks the folder)",
                                               fmt::join(left, ", "), marker));
  };
  if (marked) {
    for (const std::string& path : replaced) {
      std::error_code ec;
      if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) continue;
      const std::string aside = replaced_name(path);
      std::remove(aside.c_str());  // an earlier cut's
      const bool goes = std::find(remove_first.begin(), remove_first.end(), path) != remove_first.end();
      // A second link where the file system has them; else moved (its name empty until the rename).
      if (goes || ::link(path.c_str(), aside.c_str()) != 0) std::filesystem::rename(path, aside, ec);
      if (ec) fail(fmt::format("cannot replace '{}': {}", path, ec.message()));
      kept.push_back(path);
    }
  }
  for (const Staged& f : staged_) {
    if (renames_left-- == 0) std::_Exit(137);
    std::error_code ec;
    if (renames_before_failure-- == 0) {
      ec = std::make_error_code(std::errc::io_error);
    } else {
      std::filesystem::rename(f.tmp, f.path, ec);
    }
    if (ec) fail(fmt::format("cannot rename '{}' to '{}': {}", f.tmp, f.path, ec.message()));
    renamed.push_back(f.path);
  }
  // Whole: the earlier files go, and any an earlier cut left aside in the output's folder (its
  // own: a marked output is a folder's, which its writer holds). Only after a cut (its marker was
  // there): a file of that suffix in a folder never cut is the user's (every export removed them).
  for (const std::string& path : kept) std::remove(replaced_name(path).c_str());
  if (marked && was_marked) {
    std::error_code ec;
    for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(folder, ec)) {
      std::error_code type_ec;
      if (e.path().filename().string().ends_with(kReplacedSuffix) && !e.is_directory(type_ec)) {
        std::remove(e.path().c_str());
      }
    }
  }
  staged_.clear();  // and their holds
  ckpt::sync_dir(folder);
  if (marked) {
    // Left, it would call the complete output cut: said, not passed over.
    if (std::remove(marker.c_str()) != 0 && errno != ENOENT) {
      throw_runtime_error("the output in {} is complete, but its marker {} cannot be removed: {}", folder, marker,
                          std::strerror(errno));
    }
    ckpt::sync_dir(folder);
  }
  folder_ = {};
}

}  // namespace zt
