// The checkpoint folder: `latest` resolution with fallback to the newest valid checkpoint, keep-last,
// leftovers of killed saves, one keep-last cannot remove, saving the same step twice, a `latest` that cannot be updated
// after a complete save (saved, with a warning, not "not saved"), what `ckpt verify FOLDER` judges, and the checkpoints
// a resume from an older one sets aside.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/checkpoint_reader.h"
#include "engine/app/checkpoint/checkpoint_resolution.h"
#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/checkpoint/folder_lock.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/checkpoint/temp_folder_test.h"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;

class CheckpointFolder : public testing::TempFolderTest {
 protected:
  std::string save(std::int64_t step, int keep_last = 0, const nlohmann::json& extra = nlohmann::json::object()) {
    return testing::save_simulated(folder_, table_, 2, 2, step, keep_last, extra);
  }
  // A save of one trajectory: its id, and the id of the save before it ("" for none).
  static nlohmann::json lineage(const std::string& id, const std::string& previous) {
    return {{"save_id", id}, {"previous_save_id", previous}};
  }
  std::vector<std::int64_t> steps() const {
    std::vector<std::int64_t> out;
    for (const CheckpointEntry& e : list_checkpoints(folder_)) out.push_back(e.step);
    return out;
  }
  ParamTable table_ = testing::odd_table();
};

TEST_F(CheckpointFolder, LatestNamesTheNewestSave) {
  save(10);
  const std::string newest = save(20);
  EXPECT_EQ(read_latest(folder_), "step_00000020");
  const ResolvedCheckpoint r = resolve_checkpoint(folder_, Validation::kChecksums);
  EXPECT_EQ(r.path, newest);
  EXPECT_TRUE(r.notes.empty());
}

TEST_F(CheckpointFolder, CorruptLatestFallsBackToTheNewestValidOneSayingSo) {
  const std::string older = save(10);
  const std::string newer = save(20);
  fs::resize_file(newer + "/rank_00000.bin", 5);
  const ResolvedCheckpoint r = resolve_checkpoint(folder_, Validation::kStructure);
  EXPECT_EQ(r.path, older);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("step_00000020 is not usable"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("rank_00000.bin"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("falling back"), std::string::npos) << r.notes[0];
}

TEST_F(CheckpointFolder, ChecksumValidationCatchesWhatStructureDoesNot) {
  const std::string older = save(10);
  const std::string newer = save(20);
  {
    std::fstream f(newer + "/rank_00001.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4);
    f.put('\x7f');
  }
  EXPECT_EQ(resolve_checkpoint(folder_, Validation::kStructure).path, newer);
  EXPECT_EQ(resolve_checkpoint(folder_, Validation::kChecksums).path, older);
}

// eval --ckpt and ckpt export: a folder's damaged newest checkpoint falls back as --resume's does;
// an explicit one is read (its reader checks the checksums as it goes) without a first pass.
TEST_F(CheckpointFolder, ChecksumsToChooseFallBackInAFolderOnly) {
  const std::string older = save(10);
  const std::string newer = save(20);
  {
    std::fstream f(newer + "/rank_00001.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4);
    f.put('\x7f');
  }
  const ResolvedCheckpoint r = resolve_checkpoint(folder_, Validation::kChecksumsToChoose);
  EXPECT_EQ(r.path, older);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("step_00000020 is not usable"), std::string::npos) << r.notes[0];
  EXPECT_EQ(resolve_checkpoint(newer, Validation::kChecksumsToChoose).path, newer);
}

// A run resumed from an older checkpoint: the later ones (another trajectory's) go to superseded/,
// out of keep-last's count and the folder's fallback, and `latest` names this trajectory's newest.
TEST_F(CheckpointFolder, ResumingEarlierSetsTheLaterCheckpointsAside) {
  for (std::int64_t step : {4, 8, 12}) save(step);
  EXPECT_EQ(set_aside_checkpoints_after(folder_, 4), (std::vector<std::string>{"step_00000008", "step_00000012"}));
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{4}));
  EXPECT_EQ(read_latest(folder_), "step_00000004");
  EXPECT_TRUE(is_complete(folder_ + "/superseded/step_00000012"));
  for (std::int64_t step : {6, 8, 10}) save(step, /*keep_last=*/2);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{8, 10}));
  EXPECT_EQ(set_aside_checkpoints_after(folder_, 8), (std::vector<std::string>{"step_00000010"}));
  EXPECT_EQ(read_latest(folder_), "step_00000008");
  EXPECT_TRUE(is_complete(folder_ + "/superseded/step_00000010"));
  EXPECT_TRUE(set_aside_checkpoints_after(folder_, 8).empty());
  EXPECT_EQ(set_aside_checkpoints_after(folder_, 6), (std::vector<std::string>{"step_00000008"}));
  EXPECT_TRUE(is_complete(folder_ + "/superseded/step_00000008.2"));  // the first trajectory's step 8 kept
  EXPECT_FALSE(fs::exists(folder_ + "/latest"));                      // nothing of this trajectory is left to name
  EXPECT_EQ(resolve_checkpoint(folder_ + "/superseded/step_00000008", Validation::kChecksums).path,
            folder_ + "/superseded/step_00000008");
}

// A resume from a checkpoint outside the folder's trajectory (superseded/, after a rollback; or a
// finished run's, into a folder a fresh run has used since): the folder's checkpoints at or before
// its step that are not its ancestors by save id are another trajectory's too. A checkpoint from
// before save ids cannot tell and stays.
TEST_F(CheckpointFolder, ResumingAnotherLineageSetsTheFoldersOtherCheckpointsAside) {
  save(60, 0, lineage("a60", ""));
  save(70, 0, lineage("a70", "a60"));
  save(80, 0, lineage("a80", "a70"));
  // Rolled back to 70 with another learning rate: A's 80 aside, B's 80 saved.
  EXPECT_EQ(set_aside_other_trajectories(folder_, 70, "a70", "a60"), (std::vector<std::string>{"step_00000080"}));
  save(80, 0, lineage("b80", "a70"));
  // Back to A's 80: B's goes aside; A's 60 and 70, its ancestors, stay.
  EXPECT_EQ(set_aside_other_trajectories(folder_, 80, "a80", "a70"), (std::vector<std::string>{"step_00000080"}));
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{60, 70}));
  EXPECT_EQ(read_latest(folder_), "step_00000070");
  EXPECT_TRUE(is_complete(folder_ + "/superseded/step_00000080.2"));
  // A fresh run's checkpoint and one from before save ids; a resume of another run's step 40.
  save(10, 0, lineage("f10", ""));
  save(20);
  EXPECT_EQ(set_aside_other_trajectories(folder_, 40, "k40", "k30"),
            (std::vector<std::string>{"step_00000010", "step_00000060", "step_00000070"}));
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{20}));
  // Resuming a checkpoint of the folder keeps it and its ancestors.
  save(30, 0, lineage("c30", ""));
  save(40, 0, lineage("c40", "c30"));
  EXPECT_TRUE(set_aside_other_trajectories(folder_, 40, "c40", "c30").empty());
}

TEST_F(CheckpointFolder, LatestPointingAtAMissingDirectoryFallsBack) {
  const std::string older = save(10);
  write_latest(folder_, "step_00000099");
  const ResolvedCheckpoint r = resolve_checkpoint(folder_, Validation::kStructure);
  EXPECT_EQ(r.path, older);
  // Said as the pointer naming none (it said "removed as it was read", a live run's pruning).
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("step_00000099: no such directory, though " + folder_ + "/latest names it"),
            std::string::npos)
      << r.notes[0];
}

// The chosen checkpoint comes held for reading (taken before its validation), so a live run's
// keep_last leaves it to the caller's reader; and `latest` keeps its lineage rule where the
// checkpoint it names is gone for good (LatestPointingAtAMissingDirectoryFallsBack).
TEST_F(CheckpointFolder, TheChosenCheckpointComesHeldForReading) {
  save(10);
  const std::string newer = save(20);
  const ResolvedCheckpoint r = resolve_checkpoint(folder_, Validation::kChecksumsToChoose);
  EXPECT_EQ(r.path, newer);
  EXPECT_TRUE(r.held.is_open());
  EXPECT_TRUE(r.held.still_at(newer));
  FileHandle exclusive;
  EXPECT_FALSE(FileHandle::hold_exclusive(newer, exclusive)) << "keep_last's hold is refused while it is held";
}

// keep_last over a checkpoint a reader holds: it stays for a later save, marked pruned, so that a
// resume that cannot tell it for an ancestor (the saves between pruned) leaves it to keep_last
// rather than set it aside to superseded/ for good; the next save removes it once free.
TEST_F(CheckpointFolder, KeepLastMarksAHeldCheckpointPrunedAndAResumeLeavesItToKeepLast) {
  const std::string oldest = save(10, 0, lineage("a10", ""));
  auto reader = std::make_unique<CheckpointReader>(oldest);
  save(20, 0, lineage("a20", "a10"));
  const std::string newest = save(30, 0, lineage("a30", "a20"));
  std::vector<std::string> marked;
  apply_keep_last(folder_, 1, newest, marked);
  EXPECT_EQ(marked, std::vector<std::string>({"step_00000010"}));  // marked now
  EXPECT_EQ(steps(), std::vector<std::int64_t>({10, 30}));
  EXPECT_TRUE(fs::exists(oldest + "/PRUNED"));
  marked.clear();
  apply_keep_last(folder_, 1, newest, marked);
  EXPECT_TRUE(marked.empty());  // marked before: not said again
  EXPECT_NO_THROW(reader->verify_checksums());
  reader.reset();
  // The resume of step 30 cannot link a10 (a20 gone): left, not set aside.
  EXPECT_TRUE(set_aside_other_trajectories(folder_, 30, "a30", "a20").empty());
  apply_keep_last(folder_, 1, newest, marked);
  EXPECT_TRUE(marked.empty());
  EXPECT_EQ(steps(), std::vector<std::int64_t>({30}));
}

// A resume's set-aside never points `latest` at a checkpoint keep_last marked pruned (another
// trajectory's, perhaps: the folder's own run pruned it as a reader held it); none left, no latest.
TEST_F(CheckpointFolder, LatestIsNeverPointedAtAPrunedCheckpoint) {
  const std::string older = save(10, 0, lineage("b10", ""));
  auto reader = std::make_unique<CheckpointReader>(older);
  const std::string newer = save(20, 0, lineage("b20", "b10"));
  std::vector<std::string> marked;
  apply_keep_last(folder_, 1, newer, marked);
  ASSERT_TRUE(fs::exists(older + "/PRUNED"));
  reader.reset();
  // A resume of another trajectory's step 15 (a superseded one) sets step 20, which latest named, aside.
  EXPECT_EQ(set_aside_other_trajectories(folder_, 15, "a15", "a14"), std::vector<std::string>({"step_00000020"}));
  EXPECT_FALSE(fs::exists(folder_ + "/latest"));
}

// A folder a live run holds but has not saved in yet (a fresh run set its earlier checkpoints
// aside): a reader is told to wait for the run, not to resume a set-aside checkpoint by its path.
TEST_F(CheckpointFolder, ALiveRunsFolderBeforeItsFirstSaveSaysToWait) {
  const std::string old = save(10);
  fs::create_directories(folder_ + "/superseded");
  fs::rename(old, folder_ + "/superseded/step_00000010");
  fs::remove(folder_ + "/latest");          // as a fresh run's set-aside of every checkpoint leaves it
  const FolderLock live(folder_, folder_);  // this process: alive
  try {
    resolve_checkpoint(folder_, Validation::kStructure);
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("a live run (pid "), std::string::npos) << what;
    EXPECT_NE(what.find("trains there and has saved none yet: wait for it (the folder's 1 earlier checkpoint(s) are "
                        "set aside in"),
              std::string::npos)
        << what;
  }
}

TEST_F(CheckpointFolder, AnExplicitBadCheckpointIsAnErrorNotAFallback) {
  save(10);
  const std::string newer = save(20);
  fs::remove(newer + "/rank_00001.bin");
  try {
    resolve_checkpoint(newer, Validation::kStructure);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rank_00001.bin: rank file missing"), std::string::npos) << e.what();
  }
}

// The `latest` pointer given for a checkpoint: refused, naming the folder to give instead.
TEST_F(CheckpointFolder, TheLatestPointerFileNamesItsFolder) {
  save(10);
  try {
    resolve_checkpoint(folder_ + "/latest", Validation::kStructure);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pointer file, not a checkpoint; give the folder (" + folder_ + ")"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointFolder, NothingValidIsAnErrorNamingTheFolder) {
  EXPECT_THROW(resolve_checkpoint(folder_, Validation::kStructure), InputError);
  const std::string only = save(10);
  fs::remove(only + "/manifest.json");
  try {
    resolve_checkpoint(folder_, Validation::kStructure);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no valid checkpoint"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointFolder, KeepLastDeletesOnlyOlderCompleteCheckpoints) {
  for (std::int64_t step : {10, 20, 30, 40}) save(step, /*keep_last=*/2);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{30, 40}));
  EXPECT_EQ(read_latest(folder_), "step_00000040");
  save(50, 0);  // keep_last 0 keeps everything
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{30, 40, 50}));
}

// A checkpoint keep_last cannot remove (here made immutable, as chattr +i does; another user's file
// in it, or a read-only snapshot, does the same) is named, and the others are pruned all the same:
// the first failure kept every checkpoint after it, save after save.
TEST_F(CheckpointFolder, KeepLastPrunesTheOthersPastOneItCannotRemove) {
  for (std::int64_t step : {10, 20, 30}) save(step);
  const std::string stuck = folder_ + "/step_00000010";
  const int fd = ::open(stuck.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  int flags = 0;
  const bool immutable = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
                         (flags |= FS_IMMUTABLE_FL, ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
  ::close(fd);
  if (!immutable) GTEST_SKIP() << "cannot make a folder immutable here (needs CAP_LINUX_IMMUTABLE and ext4/xfs)";
  const std::string newest = save(40);
  std::vector<std::string> marked;
  std::string error;
  try {
    apply_keep_last(folder_, 1, newest, marked);
  } catch (const RuntimeError& e) {
    error = e.what();
  }
  const int again = ::open(stuck.c_str(), O_RDONLY | O_DIRECTORY);
  flags &= ~FS_IMMUTABLE_FL;
  EXPECT_EQ(::ioctl(again, FS_IOC_SETFLAGS, &flags), 0);
  ::close(again);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{10, 40}));
  EXPECT_NE(error.find("cannot remove checkpoint '" + stuck + "'"), std::string::npos) << error;
  EXPECT_EQ(read_latest(folder_), "step_00000040");
}

TEST_F(CheckpointFolder, LeftoversOfAKilledSaveAreNotCheckpointsAndAreCleanedUp) {
  save(10);
  fs::create_directories(folder_ + "/.tmp-step_00000020");
  std::ofstream(folder_ + "/.tmp-step_00000020/rank_00000.bin") << "partial";
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{10}));
  EXPECT_EQ(resolve_checkpoint(folder_, Validation::kChecksums).path, folder_ + "/step_00000010");
  save(30);
  EXPECT_FALSE(fs::exists(folder_ + "/.tmp-step_00000020"));
}

// A complete checkpoint copied under a save's staging name, or a removal's, is still never read
// when named: the refusal says which it is and what to give instead (a resume from it would have
// seen its own next save delete it).
TEST_F(CheckpointFolder, StagingAndRemovalDirectoriesAreRefusedWhenNamed) {
  const std::string saved = save(10);
  for (const char* prefix : {".tmp-", ".del-"}) {
    const std::string copy = folder_ + "/" + prefix + "step_00000020";
    fs::copy(saved, copy);
    const std::string link = folder_ + "/step_00000030";  // a step_* name resolving to the copy
    fs::create_directory_symlink(copy, link);
    for (const std::string& given : {copy, copy + "/", copy + "/.", link}) {
      try {
        resolve_checkpoint(given, Validation::kChecksumsToChoose);
        FAIL() << given << ": no error";
      } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(
            what.find(std::string(prefix) == ".tmp-" ? "a save's staging directory" : "a checkpoint being removed"),
            std::string::npos)
            << what;
        EXPECT_NE(what.find("rename it to step_00000020"), std::string::npos) << what;
      }
    }
    fs::remove(link);
  }
  EXPECT_EQ(resolve_checkpoint(folder_, Validation::kChecksumsToChoose).path, saved);
  // A checkpoint folder may be called so: its checkpoints are read.
  const std::string odd_folder = folder_ + "/.tmp-checkpoints";
  fs::create_directory(odd_folder);
  fs::copy(saved, odd_folder + "/step_00000010");
  EXPECT_EQ(resolve_checkpoint(odd_folder, Validation::kChecksumsToChoose).path, odd_folder + "/step_00000010");
}

TEST_F(CheckpointFolder, SavingTheSameStepAgainReplacesIt) {
  save(10);
  const std::string again = save(10);
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{10}));
  CheckpointReader(again).verify_checksums();
}

// The step directory is complete and durable before `latest` is replaced: when that replacement
// fails (here `latest.tmp` is a directory, as a full or read-only disk would fail it), the save is
// still a save -- with a warning that says so -- no `.tmp` is left, and the stale pointer is
// removed: resolution takes the newer checkpoint only through its chain of saves from the one
// `latest` names, which keep-last would cut, and without a pointer it takes the newest valid one.
TEST_F(CheckpointFolder, ALatestThatCannotBeUpdatedLeavesTheSaveCompleteWithAWarning) {
  save(10, 1, lineage("a10", ""));
  fs::create_directories(folder_ + "/latest.tmp/blocker");
  const CommitResult r = testing::save_simulated_result(folder_, table_, 2, 2, 20, 1, lineage("a20", "a10"));
  EXPECT_EQ(r.path, folder_ + "/step_00000020");
  CheckpointReader(r.path).verify_checksums();
  EXPECT_NE(r.warning.find("is saved, but"), std::string::npos) << r.warning;
  EXPECT_NE(r.warning.find("it no longer names a checkpoint"), std::string::npos) << r.warning;
  EXPECT_EQ(read_latest(folder_), "");
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{20})) << "keep-last went on";
  EXPECT_EQ(checkpoint_to_verify(folder_), folder_ + "/step_00000020");
  const ResolvedCheckpoint resolved = resolve_checkpoint(folder_, Validation::kChecksumsToChoose);
  EXPECT_EQ(resolved.path, folder_ + "/step_00000020");
  EXPECT_TRUE(resolved.notes.empty());
}

// A `latest` that stays stuck (its update failing every save, or a folder in its place) stops
// neither keep-last (the folder would keep every save until the disk filled) nor a resume's choice
// of the newest checkpoint: a pointer kept while keep-last ran would cut the chain of saves from it
// to the newest, and the resume would take the old one and set the newest aside as another run's.
TEST_F(CheckpointFolder, KeepLastGoesOnWhileLatestCannotBeUpdated) {
  save(10, 1, lineage("a10", ""));
  fs::create_directories(folder_ + "/latest.tmp/blocker");
  for (std::int64_t step : {20, 30, 40}) {
    const CommitResult r = testing::save_simulated_result(
        folder_, table_, 2, 2, step, 1, lineage(fmt::format("a{}", step), fmt::format("a{}", step - 10)));
    EXPECT_NE(r.warning.find("could not be updated"), std::string::npos) << r.warning;
  }
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{40}));
  EXPECT_EQ(resolve_checkpoint(folder_, Validation::kChecksumsToChoose).path, folder_ + "/step_00000040");
  fs::remove_all(folder_ + "/latest.tmp");
  fs::create_directories(folder_ + "/latest/blocker");
  for (std::int64_t step : {50, 60, 70}) {
    const CommitResult stuck = testing::save_simulated_result(
        folder_, table_, 2, 2, step, 2, lineage(fmt::format("a{}", step), fmt::format("a{}", step - 10)));
    EXPECT_NE(stuck.warning.find("it no longer names a checkpoint"), std::string::npos) << stuck.warning;
  }
  EXPECT_EQ(steps(), (std::vector<std::int64_t>{60, 70}));
  EXPECT_EQ(resolve_checkpoint(folder_, Validation::kChecksumsToChoose).path, folder_ + "/step_00000070");
}

// A kill between a save's rename and its pointer update leaves latest one behind: the newer
// checkpoints that continue latest's (their previous_save_id chain) are this run's, and resolving
// to latest's would lose their steps, then set them aside as if another run's. Damaged, it falls back.
TEST_F(CheckpointFolder, ACheckpointNewerThanLatestIsTaken) {
  save(10, 0, lineage("a10", ""));
  save(20, 0, lineage("a20", "a10"));
  const std::string newest = save(30, 0, lineage("a30", "a20"));
  write_latest(folder_, "step_00000010");  // as if killed after the renames of 20 and 30
  ResolvedCheckpoint r = resolve_checkpoint(folder_, Validation::kChecksums);
  EXPECT_EQ(r.path, newest);
  EXPECT_EQ(checkpoint_to_verify(folder_), newest);
  fs::resize_file(newest + "/rank_00000.bin", 5);
  r = resolve_checkpoint(folder_, Validation::kStructure);
  EXPECT_EQ(r.path, folder_ + "/step_00000020");
  fs::resize_file(folder_ + "/step_00000020/rank_00000.bin", 5);
  EXPECT_EQ(resolve_checkpoint(folder_, Validation::kStructure).path, folder_ + "/step_00000010");
}

// A checkpoint from before save ids is named in the lineage by its manifest's seal: the first save
// of a run resumed from it after an upgrade continues it, and a kill before latest names that save
// does not lose its steps. Another save from before save ids continues nothing.
TEST_F(CheckpointFolder, TheFirstSaveAfterAnUpgradeContinuesAnOldLatest) {
  const std::string old = save(10);  // from before save ids
  const std::string id = CheckpointReader(old).manifest().lineage_id();
  EXPECT_EQ(id.rfind("crc32:", 0), 0u) << id;
  save(15);  // an old save past it: no previous_save_id
  const std::string resumed = save(20, 0, lineage("c20", id));
  write_latest(folder_, "step_00000010");  // as if killed after the rename of 20
  EXPECT_EQ(resolve_checkpoint(folder_, Validation::kChecksums).path, resumed);
  EXPECT_EQ(checkpoint_to_verify(folder_), resumed);
}

// A step_* newer than latest's that does not continue it is another trajectory's (a folder reused
// by a run that did not set it aside: an older binary's rollback left the abandoned run's later
// checkpoints, or the folder was copied, which resets its files' times): latest's is taken,
// however recent the newer one's files. So is it for a newer one from before save ids.
TEST_F(CheckpointFolder, ANewerCheckpointThatDoesNotContinueLatestIsAnotherRuns) {
  save(30, 0, lineage("a30", "a20"));                            // run A's, past its step 20
  save(40);                                                      // from before save ids
  save(5, 0, lineage("b5", "a0"));                               // run B's first
  save(10, 0, lineage("b10", "b5"));                             // run B's, which latest names
  for (const char* step : {"step_00000030", "step_00000040"}) {  // as a copy leaves them: after the pointer
    fs::last_write_time(folder_ + "/" + step + "/manifest.json",
                        fs::last_write_time(folder_ + "/latest") + std::chrono::seconds(5));
  }
  EXPECT_EQ(read_latest(folder_), "step_00000010");
  const ResolvedCheckpoint r = resolve_checkpoint(folder_, Validation::kChecksums);
  EXPECT_EQ(r.path, folder_ + "/step_00000010");
  EXPECT_TRUE(r.notes.empty());
  EXPECT_EQ(checkpoint_to_verify(folder_), folder_ + "/step_00000010");
  // latest's damaged: run B's older one is taken, never the other trajectory's newer ones.
  fs::resize_file(folder_ + "/step_00000010/rank_00000.bin", 5);
  EXPECT_EQ(resolve_checkpoint(folder_, Validation::kStructure).path, folder_ + "/step_00000005");
}

// A failed atomic write leaves no partial `.tmp` behind.
TEST_F(CheckpointFolder, AFailedAtomicWriteLeavesNoTemporaryFile) {
  const std::string path = folder_ + "/missing_dir/file.json";
  EXPECT_THROW(write_file_atomically(path, "{}"), std::exception);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  fs::create_directories(folder_ + "/target");  // rename onto a directory fails after the write
  EXPECT_THROW(write_file_atomically(folder_ + "/target", "{}"), std::exception);
  EXPECT_FALSE(fs::exists(folder_ + "/target.tmp"));
}

TEST_F(CheckpointFolder, VerifyJudgesTheCheckpointLatestNames) {
  save(10);
  save(20);
  EXPECT_EQ(checkpoint_to_verify(folder_), folder_ + "/step_00000020");
  EXPECT_EQ(checkpoint_to_verify(folder_ + "/step_00000010"), folder_ + "/step_00000010");
  fs::remove(folder_ + "/latest");
  EXPECT_EQ(checkpoint_to_verify(folder_), folder_ + "/step_00000020") << "no latest: the newest";
}

}  // namespace
}  // namespace zt::ckpt
