// A held folder lock's view of a takeover: lost_to() reads the lock file, and a lock once found
// another run's stays lost (its taker may end and remove the file; this run must not take that for
// its own again); lost_now() answers from the heartbeat while it confirms the lock. Whole runs
// (stopped, taken over, continued) are tests/trainer/run_consistency_test.py's.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/app/checkpoint/folder_lock.h"
#include "engine/base/core/check.h"
#include "tests/checkpoint/temp_folder_test.h"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;

class HeldFolderLock : public testing::TempFolderTest {
 protected:
  // Replaces the lock file whole, as a taker's link(2) does, with another host's run.
  void forge_taker(const std::string& lock_path) const {
    const std::string temp = lock_path + ".forged";
    std::ofstream(temp) << R"({"host": "elsewhere", "pid": 4242, "run_dir": "x", "started": "then", )"
                        << R"("token": "elsewhere:4242:1"})"
                        << "\n";
    fs::rename(temp, lock_path);
  }
};

TEST_F(HeldFolderLock, IsOwnUntilAnotherRunTakesItAndThenStaysLost) {
  const FolderLock lock(folder_, folder_, LockedFolder::kRunDirectory);
  EXPECT_EQ(lock.path(), (fs::path(folder_) / "RUN_LOCK").string());
  EXPECT_EQ(lock.lost_to(), "");
  EXPECT_EQ(lock.lost_now(), "");
  forge_taker(lock.path());
  const std::string taker = lock.lost_to();
  EXPECT_NE(taker.find("pid 4242 on host elsewhere"), std::string::npos) << taker;
  EXPECT_EQ(lock.lost_now(), taker);
  fs::remove(lock.path());  // the taker ended
  EXPECT_EQ(lock.lost_to(), taker);
  EXPECT_EQ(lock.lost_now(), taker);
}

TEST_F(HeldFolderLock, AnUnreadableOrVanishedFileIsNotAnotherRunsLock) {
  const FolderLock lock(folder_, folder_);
  fs::remove(lock.path());
  EXPECT_EQ(lock.lost_to(), "");
  std::ofstream(lock.path()) << "not json\n";
  EXPECT_EQ(lock.lost_to(), "");
  EXPECT_EQ(lock.lost_now(), "");
}

// The checkpoint folder removed by hand under a running run (its lock with it): the heartbeat makes
// the lock again, so a second run on the folder is still refused rather than let in beside it.
TEST_F(HeldFolderLock, ALockRemovedWithItsFolderIsMadeAgainByTheHeartbeat) {
  const std::string folder = folder_ + "/checkpoints";
  const FolderLock lock(folder, folder_);
  fs::remove_all(folder);
  for (int i = 0; i < 40 && !fs::exists(lock.path()); ++i) usleep(200'000);  // within two beats
  ASSERT_TRUE(fs::exists(lock.path()));
  EXPECT_EQ(lock.lost_to(), "");
  try {
    const FolderLock second(folder, folder_ + "/other");
    ADD_FAILURE() << "a second run took the folder";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is in use by another run"), std::string::npos) << e.what();
  }
}

TEST_F(HeldFolderLock, NowTrustsTheHeartbeatWhileItIsRecent) {
  const FolderLock lock(folder_, folder_);
  forge_taker(lock.path());
  // Just taken: the lock was confirmed at its taking, so lost_now does not read the file yet (the
  // heartbeat does, within kHeartbeatSeconds; after two missed beats lost_now reads it itself:
  // run_consistency_test.py stops a run to see that).
  EXPECT_EQ(lock.lost_now(), "");
  EXPECT_NE(lock.lost_to().find("elsewhere"), std::string::npos);
  EXPECT_NE(lock.lost_now().find("elsewhere"), std::string::npos);
}

// live_holder (what `sample --run` and `eval --run` ask of a run directory's RUN_LOCK): a live
// holder is named; no lock, a dead pid's, and a file of other fields' types (a damaged lock: it
// ended those commands with a JSON type error) are nobody's.
TEST_F(HeldFolderLock, LiveHolderNamesOnlyALivingRun) {
  const std::string run_lock = (fs::path(folder_) / "RUN_LOCK").string();
  EXPECT_EQ(live_holder(run_lock), "");
  {
    const FolderLock lock(folder_, folder_, LockedFolder::kRunDirectory);
    EXPECT_NE(live_holder(run_lock).find(fmt::format("pid {}", getpid())), std::string::npos) << live_holder(run_lock);
  }
  EXPECT_EQ(live_holder(run_lock), "");  // released
  std::ofstream(run_lock) << R"({"host": 5, "pid": "one"})";
  EXPECT_EQ(live_holder(run_lock), "");
}

// A lock copied with its folder (cp -a of a run directory, the run alive): no process holds the
// copy, whose holder beats its own folder's lock; taken over at once and said, where the refusal
// told the user to end the live run.
TEST_F(HeldFolderLock, ALockCopiedWithItsFolderIsTakenOverAsACopy) {
  const std::string a = folder_ + "/a", b = folder_ + "/b";
  const FolderLock live(a, a, LockedFolder::kRunDirectory);
  fs::create_directories(b);
  fs::copy_file(live.path(), b + "/RUN_LOCK");
  // Fresh, it may be a live holder's (the same folder mounted twice): not taken for a copy while its
  // time moves; a copy never beats, and past three beats it is one.
  try {
    const FolderLock early(b, b, LockedFolder::kRunDirectory);
    ADD_FAILURE() << "a fresh copy was taken over";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is in use by another run"), std::string::npos) << e.what();
  }
  fs::last_write_time(b + "/RUN_LOCK", fs::file_time_type::clock::now() - std::chrono::seconds(20));
  const FolderLock second(b, b, LockedFolder::kRunDirectory);
  EXPECT_NE(second.note().find("a copy of another folder's lock"), std::string::npos) << second.note();
  EXPECT_EQ(live.lost_to(), "");
}

// The lock's pid now another process's (this test's parent: its start ticks are not the lock's),
// however fresh the lock's time: the holder is gone, taken over at once, where it was refused as
// "in use by another run" for a minute. A taker's file left by a dead pid is removed at once too
// (it named no one and blocked every run for a minute).
TEST_F(HeldFolderLock, APidReusedOrADeadTakerHoldsNothing) {
  const std::string folder = folder_ + "/c";
  fs::create_directories(folder);
  std::string host(256, '\0');
  gethostname(host.data(), host.size());
  host.resize(std::strlen(host.c_str()));
  std::string boot, ns;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
  ns = fs::read_symlink("/proc/self/ns/pid").string();
  const auto lock_text = [&](pid_t pid, const char* ticks) {
    return fmt::format(R"({{"host": "{}", "pid": {}, "run_dir": "x", "started": "then", "start_ticks": "{}", )"
                       R"("boot_id": "{}", "pid_namespace": "{}", "token": "{}:{}:1"}})",
                       host, pid, ticks, boot, ns, host, pid);
  };
  std::ofstream(folder + "/LOCK") << lock_text(getppid(), "1") << "\n";
  const FolderLock reused(folder, folder);
  EXPECT_NE(reused.note().find("gone"), std::string::npos) << reused.note();
  // A dead pid's lock, and a taker's file a dead pid left (pid 0x7fffffff runs nowhere).
  const std::string other = folder_ + "/d";
  fs::create_directories(other);
  std::ofstream(other + "/LOCK") << lock_text(0x7ffffffe, "1") << "\n";
  std::ofstream(other + "/LOCK.takeover") << lock_text(0x7fffffff, "1") << "\n";
  const FolderLock taken(other, other);
  EXPECT_NE(taken.note().find("gone"), std::string::npos) << taken.note();
}

// A lock this code did not write (fields of other types, a pid past pid_t's range or none), fresh:
// nobody's, taken over as an unreadable one is (the JSON library's type error ended the run, and a
// pid of 1e300 converted to pid_t was undefined behaviour). Found by fuzzing.
TEST_F(HeldFolderLock, ALockOfOtherFieldTypesIsNobodysAndTakenOver) {
  std::string host(256, '\0');
  gethostname(host.data(), host.size());
  host.resize(std::strlen(host.c_str()));
  const std::string texts[] = {R"({"host": 1})",
                               fmt::format(R"({{"host": "{}", "pid": "1"}})", host),
                               R"({"host": [1], "pid": 12})",
                               R"({"folder": "1:2", "host": 7, "pid": 12})",
                               fmt::format(R"({{"host": "{}", "pid": 1e300}})", host),
                               R"({"host": "elsewhere", "pid": 18446744073709551615})",
                               R"({"host": "elsewhere", "pid": 12, "started": {"at": 1}})"};
  int n = 0;
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const std::string folder = fmt::format("{}/odd{}", folder_, n++);
    fs::create_directories(folder);
    std::ofstream(folder + "/RUN_LOCK") << text << "\n";
    EXPECT_EQ(live_holder(folder + "/RUN_LOCK"), "");
    const FolderLock lock(folder, folder, LockedFolder::kRunDirectory);
    EXPECT_NE(lock.note().find("the lock file's fields are not this program's"), std::string::npos) << lock.note();
  }
}

}  // namespace
}  // namespace zt::ckpt
