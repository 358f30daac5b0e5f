// How a checkpoint's data identity (run_identity.h) differs from the files a run reads now: the
// training files, which decide the trajectory (a resume refuses their change without
// --allow-config-change), and the validation and vocabulary files, which do not (noted; eval --val
// refuses another validation file). One change each, "what: old -> new".
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/app/trainer/run_identity.h"

namespace zt {

// The differences between a checkpoint's data identity and the run's in the files the training
// batches come from (the train split's; every file of a checkpoint saved before splits were
// recorded), one "what: old -> new" each (a file added, gone, resized or with another fingerprint,
// or the same files in another order); empty when they are the same, also under other paths (the
// same contents in the same order: the same batches). A file read under another path is paired
// with the saved one it stands for by its contents, or, changed, by its file name: one entry,
// "(saved as <path>)".
std::vector<std::string> data_changes(const nlohmann::json& saved, const nlohmann::json& now);
// The same for the validation and vocabulary files, which do not change the trajectory: a resume
// notes them (validation losses across it are not comparable). Empty for a checkpoint saved before
// splits were recorded (data_changes compares its files).
std::vector<std::string> evaluation_data_changes(const nlohmann::json& saved, const nlohmann::json& now);
// Of those, the validation split's alone (what a validation loss reads; not the vocabulary's).
// Where `saved` records no splits (every file the run read, from an earlier build), each validation
// file read now against the saved entry of its path, else of its file name.
std::vector<std::string> validation_data_changes(const nlohmann::json& saved, const nlohmann::json& now);
// Whether the vocabulary files (vocab.json, tokenizer.json, data.vocab_file / tokenizer_file) are
// among those changes (a file found where no key names it, the tokenizer beside the first shard,
// only where `saved` records such a file: earlier builds did not): the run directory's copy is
// then this run's, which `sample` and `ckpt export` decode every checkpoint of the run with, the
// earlier ones too.
bool vocabulary_changed(const nlohmann::json& saved, const nlohmann::json& now);

}  // namespace zt
