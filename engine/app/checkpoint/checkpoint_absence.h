// What `--resume` and `ckpt verify` say of a checkpoint folder that holds no checkpoint: where its
// checkpoints are instead, or why there are none.
#pragma once

#include <string>

namespace zt::ckpt {

// "; ..." to end "PATH: no checkpoint found" with, or "": the run directory given for its folder
// (its checkpoints/), checkpoints a rollback set aside in superseded/, a first save cut off (or a
// live run's first save still being written), or a run that saved none (how a run saves).
std::string where_checkpoints_are_not(const std::string& path);

}  // namespace zt::ckpt
