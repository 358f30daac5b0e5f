// The folder an HF export writes: the run's tokenizer files it writes beside the tensors, and the
// check that it replaces nothing but an earlier export's files.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/app/checkpoint/checkpoint_model.h"
#include "engine/app/checkpoint/checkpoint_reader.h"

namespace zt::ckpt {

// What an export writes into its safetensors' metadata beside transformers' "format": which tool
// wrote the folder, so a later export can tell its own earlier one from someone else's model.
inline constexpr const char* kExportedByKey = "exported_by";
inline constexpr const char* kExportedBy = "zerotrain ckpt export";
// And the tokenizer files it wrote beside them, comma-separated ("" for none): a later export into
// the folder removes those it does not write again (they would number another model's tokens), and
// keeps any it did not write (a user's, or an export's from before this record).
inline constexpr const char* kTokenizerFilesKey = "tokenizer_files";
// And each one's crc32 as written, "name:8 hex digits" comma-separated: a file changed since (a
// user's edit: special tokens added, a chat template) is the user's, never replaced or removed.
inline constexpr const char* kTokenizerCrcKey = "tokenizer_crc32";

// The tokenizer files the folder's earlier export recorded writing (kTokenizerFilesKey of its
// tensor files), present still: `written` as it wrote them (or as an export from before
// kTokenizerCrcKey left them), `edited` changed since. None where no export recorded them.
struct EarlierTokenizerFiles {
  std::vector<std::string> written;
  std::vector<std::string> edited;
};
EarlierTokenizerFiles earlier_export_tokenizer_files(const std::filesystem::path& out_dir);

// kTokenizerCrcKey's value for `files` (name, contents).
std::string tokenizer_crc_list(const std::vector<std::pair<std::string, std::string>>& files);

// The tokenizer files an export writes, by name, with their contents: the run directory's own
// (copied), or its character- or byte-level vocab.json written as one.
struct TokenizerFiles {
  std::vector<std::pair<std::string, std::string>> files;
  bool from_vocab = false;
};
TokenizerFiles export_tokenizer_files(const std::filesystem::path& run_dir, const ModelSpec& spec);

// Whether `out` is what train.init_from named: the absolute path the run recorded where it started
// (extra.init_from_path), or the config's as given (checked from this directory too, for
// checkpoints from before the record). An export never replaces it.
bool is_init_from(const std::string& out, const Manifest& manifest);

// Throws InputError (one line naming --out and what it holds) where the export into `out_dir` would
// replace or mix with files no earlier export wrote (another model, a tokenized corpus's tokenizer)
// or the folder the run started from (train.init_from); nothing is written before.
void check_hf_export_folder(const std::string& out_dir, const Manifest& manifest, const TokenizerFiles& tokenizer);

}  // namespace zt::ckpt
