// Why a checkpoint folder holds no checkpoint, and where they are instead (see the header).
#include "engine/app/checkpoint/checkpoint_absence.h"
#include "engine/app/io/weights_location.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/app/checkpoint/checkpoint_folder.h"
#include "engine/app/checkpoint/checkpoint_manifest.h"
#include "engine/app/checkpoint/folder_lock.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

// The staging directories of saves begun in `folder` and never committed (.tmp-step_*, oldest
// first), named with their steps ("step 20, .tmp-step_00000020"); "" for none.
std::string cut_off_saves(const std::string& folder) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(kTempPrefix)) continue;
    if (const std::int64_t step = step_of(name.substr(std::string_view(kTempPrefix).size())); step >= 0) {
      found.emplace_back(step, name);
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> named;
  for (const auto& [step, name] : found) named.push_back(fmt::format("step {}, {}", step, name));
  return fmt::format("{}", fmt::join(named, "; "));
}

}  // namespace

std::string where_checkpoints_are_not(const std::string& path) {
  // Where they are instead: a run directory given for its folder, a folder whose checkpoints a
  // rollback set aside, or a run that saved none (a save is asked for: both keys are off by default).
  std::string where;
  // A live run there that has not saved yet (a fresh run sets the folder's earlier checkpoints
  // aside): it is what a reader waits for, not a checkpoint to resume by its path.
  const std::string holder = live_holder((fs::path(path) / "LOCK").string());
  if (weights_at(path) == WeightsAt::kHuggingFaceFolder) {  // pretrained weights, which --from reads
    where = "; a Hugging Face folder: eval/sample --from and train.init_from read it";
  } else if (fs::is_directory(fs::path(path) / "checkpoints")) {
    where = fmt::format("; its checkpoints are in {}", (fs::path(path) / "checkpoints").string());
  } else if (!holder.empty()) {
    const std::string cut_off = cut_off_saves(path);
    const SupersededUsage aside = superseded_usage(path);
    where =
        fmt::format("; a live run ({}) trains there and {}: wait for it{}", holder,
                    cut_off.empty() ? "has saved none yet" : fmt::format("is writing its first save ({})", cut_off),
                    aside.checkpoints > 0 ? fmt::format(" (the folder's {} earlier checkpoint(s) are set aside in {})",
                                                        aside.checkpoints, (fs::path(path) / kSupersededName).string())
                                          : "");
  } else if (const SupersededUsage aside = superseded_usage(path); aside.checkpoints > 0) {
    where = fmt::format("; {} checkpoint(s) set aside in {}: resume one by its path", aside.checkpoints,
                        (fs::path(path) / kSupersededName).string());
  } else if (const std::string cut_off = cut_off_saves(path); !cut_off.empty()) {
    // A save was asked for and begun, by a run no longer live: the folder's config saves; what it
    // lacks is a save that ended.
    where = fmt::format(
        "; the save begun there ({}) was cut off before it completed (the run was killed or failed during it), so "
        "there is nothing to resume: start the run afresh",
        cut_off);
  } else if (const fs::path folder = fs::path(path).lexically_normal(),
             run_dir = (folder.has_filename() ? folder : folder.parent_path()).parent_path();
             fs::exists(run_dir / "metrics.jsonl")) {
    where =
        "; none was saved there: a run saves them with checkpoint.every_steps or checkpoint.at_end = true "
        "(both off by default), or at a stop signal";
  }
  return where;
}

}  // namespace zt::ckpt
