// `train --resume latest|PATH`: which checkpoint a resumed run starts from. Rank 0 resolves it
// (every checksum verified, falling back past damaged checkpoints with a printed note) and the
// other ranks learn the choice through one all-gather, so every rank opens the same directory.
#pragma once

#include <string>

#include "engine/comm/communicator.h"

namespace zt {

// Collective. `arg` is "latest" (the newest valid checkpoint in `checkpoint_folder`), a checkpoint
// folder, or a step_XXXXXXXX directory. Returns the checkpoint directory on every rank; InputError
// (on every rank, rank 0's naming the cause) when there is no usable checkpoint.
std::string resolve_resume_checkpoint(Communicator& comm, const std::string& arg, const std::string& checkpoint_folder);

}  // namespace zt
