// Checks made before the first step (see the header).
#include "engine/app/trainer/start_checks.h"

#include <limits.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "engine/app/data/token_file.h"
#include "engine/app/io/input_file.h"
#include "engine/app/io/json_file.h"
#include "engine/app/io/output_file.h"
#include "engine/base/core/check.h"

namespace zt {

namespace {

namespace fs = std::filesystem;

// The folder itself, or where create_directories would make it: its nearest existing ancestor.
fs::path nearest_existing(fs::path p) {
  std::error_code ec;
  p = fs::absolute(p, ec);
  while (!p.empty() && !fs::exists(p, ec)) {
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  return p;
}

// A file that makes `dir` a dataset's folder (`zerotrain prepare`'s token files) or a tokenized
// corpus's (tools/prepare_tokens.py's shards, told by their llm.c headers, not their names), with
// what it is; empty where there is none.
std::pair<std::string, std::string> data_file_in(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {"train.bin", "val.bin"}) {
    if (fs::exists(fs::symlink_status(dir / name, ec))) return {name, "a dataset's token file"};
  }
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".bin" || !it->is_regular_file(ec)) continue;
    if (data::llmc_token_magic(p.string()) != 0) return {p.filename().string(), "a token shard"};
  }
  return {};
}

}  // namespace

void check_before_training(const RunConfig& c, const data::TokenText& text) {
  // Only what the run will do: a run that samples nothing (log.sample_tokens = 0) never encodes
  // its prompt, so the prompt is not checked.
  if (!text.has() || !c.log.samples()) return;
  // Where the text's tokens come from, named as the user gave it (a data.vocab_file was called
  // "the dataset's vocabulary" of an embedded run, and its key left out of the sources).
  const bool own_vocab = !text.is_tokenizer() && !c.data.vocab_file.empty();
  const std::string which = text.is_tokenizer() ? "the run's tokenizer"
                            : own_vocab         ? fmt::format("data.vocab_file {}", c.data.vocab_file)
                                                : std::string("the dataset's vocabulary");
  std::vector<std::int32_t> ids;
  try {
    ids = text.encode_prompt(c.log.sample_prompt);
  } catch (const InputError& e) {
    throw_input_error(
        "config error in {}: log.sample_prompt cannot be sampled from: {} ({}; the run would fail at its first "
        "sample)",
        own_vocab ? c.sources_of({"log.sample_prompt", "data.vocab_file"}) : c.sources_of({"log.sample_prompt"}),
        e.what(), which);
  }
  for (const std::int32_t id : ids) {
    if (id >= 0 && id < c.model.vocab_size) continue;
    throw_input_error(
        "config error in {}: log.sample_prompt encodes to token {} ({}), outside the model's vocabulary of {} (the "
        "run would fail, or sample from a padding row, at its first sample; log.sample_tokens = 0 samples nothing)",
        c.sources_of({"log.sample_prompt", "data.tokenizer_file"}), id, which, c.model.vocab_size);
  }
}

void check_run_directory(const std::string& run_dir) {
  const fs::path config = fs::path(run_dir) / "config.json";
  std::error_code ec;
  // A dataset's folder (`zerotrain prepare`'s token files beside its vocab.json): the run would
  // write its own vocab.json over the dataset's, so the runs that read the dataset afterwards
  // would decode through another vocabulary, and its run files would mix with the dataset's. A
  // tokenized corpus's folder (tools/prepare_tokens.py's shards beside their tokenizer.json): the
  // run's tokenizer.json would replace the one the shards were encoded with, which every later run
  // on them takes by default.
  if (const auto [file, kind] = data_file_in(run_dir); !file.empty()) {
    throw_input_error(
        "run directory {} holds {}, {} (a dataset's or tokenized corpus's folder, or token files put there): the "
        "run's {} and files would land among the data's; give the run another directory (--run-dir, or "
        "log.run_dir: by default runs/<config name>)",
        run_dir, file, kind, kind == std::string("a token shard") ? "tokenizer.json" : "vocab.json");
  }
  // The files a run writes whole and renames into place, where something else stands under their
  // names (a device, a FIFO, a folder): refused, not replaced (a rename over a character device
  // named final.safetensors took its entry). metrics.jsonl is appended to: a FIFO a reader drains
  // is a way to stream it (run_log.cpp). op_profile.json too, which only a profiled run writes (at
  // its end: refused there, after the training, it cost the run).
  for (const char* name : {"final.safetensors", "config.json", "op_profile.json"}) {
    const fs::path p = fs::path(run_dir) / name;
    if (fs::exists(fs::symlink_status(p, ec)) && !fs::is_symlink(fs::symlink_status(p, ec))) {
      require_regular_file(p.string(), fmt::format("run directory {}:", run_dir));
    }
  }
  if (!fs::exists(config, ec)) return;
  nlohmann::json doc;
  std::string why;
  try {
    doc = read_json_file(config.string());
  } catch (const InputError& e) {
    why = e.what();
  }
  // A run's config (or a user's zerotrain config kept there): an object of sections, no model_type.
  if (why.empty() && doc.is_object() && doc.contains("model_type")) {
    why = fmt::format("a Hugging Face model's, model_type {}", doc["model_type"].dump());
  } else if (why.empty() && !(doc.is_object() && (doc.contains("model") || doc.contains("train")))) {
    why = "no model or train section";
  }
  if (!why.empty()) {
    throw_input_error(
        "run directory {} holds a config.json that is not a zerotrain run's ({}); a run would replace it: "
        "give this run another --run-dir",
        run_dir, why);
  }
}

bool writes_checkpoints(const RunConfig& c) {
  return c.checkpoint.every_steps > 0 || c.checkpoint.at_end || c.checkpoint.save_on_signal;
}

void check_checkpoint_folder(const RunConfig& c, const std::string& run_dir) {
  const fs::path folder = c.checkpoint.folder_for(run_dir);
  const fs::path existing = nearest_existing(folder);
  std::error_code ec;
  // The default folder lies in the run directory (the command line's): not the config's doing.
  const std::string what = c.checkpoint.dir.empty() ? fmt::format("the run's checkpoint folder '{}'", folder.string())
                                                    : fmt::format("config error in {}: checkpoint.dir '{}'",
                                                                  c.sources_of({"checkpoint.dir"}), folder.string());
  // A default folder not made yet is made in the run directory, the one the user named (--run-dir):
  // a file in the way or a folder not writable is said of it, not of a folder the user never gave.
  const bool in_run_dir = c.checkpoint.dir.empty() && existing != fs::absolute(folder, ec);
  const std::string made = in_run_dir ? fmt::format("the run directory '{}'", run_dir) : what;
  if (existing.empty() || !fs::is_directory(existing, ec)) {
    throw_input_error("{} cannot be made: '{}' is not a directory", made, existing.string());
  }
  // A dataset's or corpus's folder, as for the run directory: the checkpoints would land among the
  // data's files (a glob over the folder then meets them), and the folder is the data's, not the run's.
  if (const auto [file, kind] = data_file_in(folder); !file.empty()) {
    throw_input_error("{} holds {}, {}: the checkpoints would land among the data's files; give {} another folder",
                      what, file, kind, c.checkpoint.dir.empty() ? "the run (--run-dir)" : "checkpoint.dir");
  }
  if (const std::string why = why_unwritable(existing.string()); !why.empty()) {
    throw_input_error("{} cannot be written ('{}' is not writable: {})", made, existing.string(), why);
  }
  // The longest path a save or a set-aside makes below the folder (/superseded/step_00000001.2/
  // rank_00000.bin: 43 characters; 64 leaves room for staging suffixes and more ranks) must fit the
  // system's path limit: a folder near it trained until its first save, then failed there.
  constexpr std::size_t kLongestBelow = 64;
  const std::size_t length = fs::absolute(folder, ec).string().size();
  if (!ec && length + kLongestBelow >= PATH_MAX) {
    throw_input_error(
        "{} is {} characters long: the files a save writes below it would pass the system's {}-character "
        "path limit; give a shorter path",
        what, length, PATH_MAX);
  }
}

}  // namespace zt
