// Which folder's tokenizer decodes a checkpoint's tokens: its run directory's copy (vocab.json,
// tokenizer.json), where that is still the vocabulary the checkpoint trained with. A later run in
// the same directory (a fresh run whose first save set this checkpoint aside in superseded/)
// replaced the copy with its own: an export or a sample of the earlier checkpoint then wrote or
// read another vocabulary's text, with exit 0.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace zt {

// `run_dir` where the checkpoint's recorded vocabulary files (its data identity's "vocab" split:
// path, bytes, fingerprint) are all among the run directory's vocab.json and tokenizer.json, or
// the directory's config.json has the checkpoint config's data section (the same vocabulary,
// written again), or the checkpoint recorded none, or the directory holds neither. Otherwise the
// folder of a recorded file that still holds the recorded contents (the prepared dataset's, the
// shards' tokenizer folder), with `note` saying so; InputError naming `checkpoint`, the recorded
// file and the run directory where none does.
std::string checkpoint_text_dir(const std::string& run_dir, const nlohmann::json& data_identity,
                                const nlohmann::json& checkpoint_config, const std::string& checkpoint,
                                std::string& note);

}  // namespace zt
