// What a run checks before its first step, so that nothing it could have known at the start fails
// it after training (and costs the trained model): the sample prompt against the run's tokenizer or
// vocabulary, and that the checkpoint folder can be written.
#pragma once

#include <string>

#include "engine/app/config/run_config.h"
#include "engine/app/data/token_text.h"

namespace zt {

// Throws InputError naming the key (log.sample_prompt) and what is wrong: `text` (the run's
// tokenizer, else its vocabulary; neither: token ids are sampled) cannot encode it, or encodes it
// to an id past the model's vocabulary (a tokenizer's template token). (The checkpoint folder is the
// trainer's to check, check_checkpoint_folder below, before it takes the folder's lock.)
void check_before_training(const RunConfig& config, const data::TokenText& text);
// That the run directory holds no one else's config.json, which a run rewrites at its start (a
// Hugging Face export's, or any file that is not a zerotrain config), and is no dataset's or
// tokenized corpus's folder (token files: the run's vocab.json or tokenizer.json would replace
// theirs): rank 0 asks before taking the directory's lock. InputError naming the file.
void check_run_directory(const std::string& run_dir);
// That the checkpoint folder can be made and written (checkpoint.dir named where the config set
// it): every rank asks, before rank 0 takes the folder's lock, in a run that writes checkpoints.
void check_checkpoint_folder(const RunConfig& config, const std::string& run_dir);
// Whether the run may write checkpoints (checkpoint.every_steps, at_end or save_on_signal): then it
// holds the folder's lock while it runs.
bool writes_checkpoints(const RunConfig& config);

}  // namespace zt
