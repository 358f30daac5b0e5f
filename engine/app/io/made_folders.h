// Folders a command makes on its way to an output (create_directories), and their removal again
// where the command fails before it wrote anything there: a refused `train` start left its empty
// run directory (or the folders above it) behind, which looked like a run that had started.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "engine/app/io/output_file.h"

namespace zt {

// The folders create_directories(path) would make, outermost first, as the file system will name
// them once their parents exist: each prefix of `path` ending in a name, resolved with
// weakly_canonical, so a ".." after a missing folder steps back out of it ("runs/new/../old/a"
// makes runs/new and runs/old/a, never names runs/old, which is there). Empty where the path
// cannot be resolved (a folder that cannot be read): then nothing is removed later either.
std::vector<std::filesystem::path> missing_folders(const std::string& path);

// Removes, innermost first, those of `made` (missing_folders' list, taken before the folders were
// made) that are empty directories now; a folder that holds anything, or that something other than
// a directory replaced, stays.
void remove_empty_folders(const std::vector<std::filesystem::path>& made);

// The folders an output needs, made: those missing are registered as partial outputs before
// create_directories makes them, so a Ctrl-C at any moment after (its staged files gone first)
// removes those left empty, and the destructor removes them where the command fails before
// keep(). Registered after they were made, a signal between the two left an empty folder that
// looked like an output.
class FoldersForOutput {
 public:
  explicit FoldersForOutput(const std::string& path);
  ~FoldersForOutput();
  FoldersForOutput(const FoldersForOutput&) = delete;
  FoldersForOutput& operator=(const FoldersForOutput&) = delete;

  // create_directories' error, if it failed (the caller says so, naming its flag).
  const std::error_code& error() const { return error_; }
  // The output is in place: its folders stay, also through a signal from now on.
  void keep();

 private:
  std::vector<std::filesystem::path> made_;
  std::vector<std::unique_ptr<PartialOutput>> on_signal_;  // innermost first, as the handler empties them
  std::error_code error_;
};

}  // namespace zt
