// An output written whole is staged beside its target and renamed over it, so a kill or a full
// disk never leaves a half-written file under the target's name.
#pragma once

#include <memory>
#include <string>

#include <string_view>
#include <vector>
#include "engine/app/checkpoint/durable_file.h"

namespace zt {

// The staging name for `path`, in its folder: "<name>.tmp", or, where that would be longer than
// the file system allows a name to be (a target name within 4 bytes of NAME_MAX, which the target
// itself may use), its first bytes and a hash of the whole name with ".tmp".
std::string staging_path(const std::string& path);

// Why no file can be made in the existing directory `dir` ("" where one can): access(2)'s answer,
// then, as root passes that everywhere, a file actually created and removed there (/proc takes
// none; a read-only bind mount may pass access).
std::string why_unwritable(const std::string& dir);

// Refuses, before any work, an output path that a write would fail on or replace wrongly: an
// existing directory, FIFO or device (a FIFO would be replaced by a regular file: as
// require_regular_file refuses it), a path with no file name ("", "runs/"), or a folder that
// does not exist or cannot be written.
// InputError naming `what` ("--out") and the path.
void check_output_path(const std::string& path, std::string_view what);

// An earlier run's file kept beside itself as <stem>.<UTC time>[-n]<extension> (through a symlink,
// the file it names, the link kept): "" where there is no file or it is empty; RuntimeError naming
// `what` where it cannot be moved.
std::string keep_aside(const std::string& path, std::string_view what);

// A staging file being written, or a folder made for an output, that a signal ending the process
// (Ctrl-C on an export, a prepare, a debug-state) must not leave behind: a 600 MB train.bin.tmp
// beside the dataset it was to replace. Registered while the object lives; once
// remove_partial_outputs_on_signal() has run, SIGINT, SIGTERM and SIGHUP remove every registered
// file, then every registered folder that is empty, and end the process as their default would
// (exit 130, 143, 129 in a shell). At most 64 at once (more are not registered).
class PartialOutput {
 public:
  explicit PartialOutput(const std::string& path, bool folder = false);
  ~PartialOutput();
  PartialOutput(const PartialOutput&) = delete;
  PartialOutput& operator=(const PartialOutput&) = delete;

 private:
  int slot_;
};
// For the commands that write outputs whole and take no stop request (train's own handlers save a
// checkpoint instead, and its staging is never read back).
void remove_partial_outputs_on_signal();

// Files written under their staging names and moved into place together once every one is
// complete: an output of several files that fails part way (a damaged checkpoint met at its tenth
// tensor, a full disk) leaves the destination as it was, an earlier output in it whole, and no
// .tmp behind (the destructor removes what was not committed). The renames themselves are one at
// a time, in staging order: a writer stages last the file whose absence a reader would notice (an
// export's config.json, a prepared dataset's vocab.json).
//
// Two writers of one output (two exports into one --out at once) would stage under the same names
// and rename each other's bytes into place, mixed: each staging file is locked while it is this
// object's (flock), and a writer that finds one locked is refused; a folder that is an output of
// its own (an export's, a prepared dataset's) is locked for the whole of it (lock_folder).
// The file StagedFiles::commit leaves in an output's folder while it replaces the output in several
// steps, and after a cut between them: the folder holds no whole output (StagedFiles::commit).
constexpr const char* kIncompleteOutputMarker = ".zt-incomplete-output";
// The suffix under which StagedFiles::commit keeps an earlier output's file (NAME.zt-replaced)
// until the new output is whole, and which a cut leaves.
constexpr std::string_view kReplacedSuffix = ".zt-replaced";

class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles();
  // Holds `dir` (an output folder of its own) until this object ends; InputError naming `what`
  // ("--out") where another writer holds it.
  void lock_folder(const std::string& dir, std::string_view what);
  // The temporary name to write `path`'s content under; InputError where another writer has it.
  std::string stage(const std::string& path);
  // Every staged file onto its name (in staging order), then the directory's entries to disk.
  // `remove_first`: files the output no longer has, removed before the first rename (an earlier
  // output's config.json, so that a kill during the renames leaves none beside the new files).
  // After every staged file is on disk and with SIGINT, SIGTERM and SIGHUP held, the earlier
  // files are kept as NAME.zt-replaced (a second link of each one a staged file replaces, so its
  // name never goes empty; remove_first's moved there), then the staged ones take their names,
  // then the earlier ones go (and those an earlier cut left in the folder): a failure on the way
  // (a file that will not move, a directory of an output's name) puts back what moved and leaves
  // no staging file, the destination as it was. A single file replacing its earlier self is one
  // atomic rename. Where it takes more than one step, kIncompleteOutputMarker marks the folder from
  // the first until the last (and after a kill between them).
  // ZT_TEST_EXPORT_EXIT_AFTER_RENAMES=n (docs/config.md, "Testing hooks"): the process ends after
  // n renames, as a kill there would end it.
  void commit(const std::string& dir, const std::vector<std::string>& remove_first = {});

 private:
  struct Staged {
    std::string tmp, path;
    std::unique_ptr<PartialOutput> partial;  // removed by a signal until committed
    ckpt::FileHandle held;                   // the staging file, held while it is this object's
  };
  std::vector<Staged> staged_;
  ckpt::FileHandle folder_;  // lock_folder's
};

}  // namespace zt
