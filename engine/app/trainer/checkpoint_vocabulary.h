// Which folder's tokenizer decodes a checkpoint's tokens: its run directory's copy (vocab.json,
// tokenizer.json), where that is still the vocabulary the checkpoint trained with. A later run in
// the same directory (a fresh run whose first save set this checkpoint aside in superseded/)
// replaced the copy with its own: an export or a sample of the earlier checkpoint then wrote or
// read another vocabulary's text, with exit 0.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace zt {

// `run_dir`, but for a checkpoint in superseded/ (set aside by a later run in the directory) whose
// run directory's vocab.json or tokenizer.json is not what it trained with: the checkpoint's
// recorded vocabulary files (its data identity's "vocab" split: path, bytes, fingerprint) are
// compared with the directory's copies, or, where it recorded none, its config's data keys with
// the directory's config.json. Then the folder of the recorded file, where it still holds the
// recorded contents under the name readers look for (vocab.json, tokenizer.json), with `note`
// saying so; else InputError naming `checkpoint` and why.
std::string checkpoint_text_dir(const std::string& run_dir, const std::string& checkpoint,
                                const nlohmann::json& data_identity, const nlohmann::json& checkpoint_config,
                                std::string& note);

}  // namespace zt
