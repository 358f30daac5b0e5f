// See the header.
#include "engine/app/trainer/checkpoint_vocabulary.h"

#include <fmt/format.h>

#include <filesystem>
#include <vector>

#include "engine/app/io/input_file.h"
#include "engine/app/trainer/run_identity.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_text.h"

namespace zt {

namespace fs = std::filesystem;

namespace {

// Null where there is no such file, a discarded value where it holds no JSON (no object either
// way, which the caller asks for); one that is no regular file (a FIFO would hang the read) is
// refused naming it.
nlohmann::json read_json_or_null(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return nlohmann::json();
  return nlohmann::json::parse(read_whole_input(path, "run config"), nullptr, /*allow_exceptions=*/false);
}

bool given(const nlohmann::json& v) { return !v.is_null() && v != "" && v != nlohmann::json::array(); }

// What a config's tokens come from, for messages: the embedded text (data.dataset's default, where
// no token file is named), shards, a token file or a prepared dataset.
std::string data_kind(const nlohmann::json& config) {
  if (given(section_value(config, "data", "train_files"))) return "shards with no vocabulary file recorded";
  if (given(section_value(config, "data", "train_file"))) return "a token file with no vocabulary file recorded";
  if (section_value(config, "data", "dataset") == "embedded") return "the embedded text";
  return "a dataset with no vocabulary file recorded";
}

// Whether two configs take their vocabulary from the same place: the data keys that name it and,
// for the embedded text, the seed and length its text follows from. Other keys may differ between
// versions or by a resume's --allow-config-change.
bool same_vocabulary_source(const nlohmann::json& a, const nlohmann::json& b) {
  for (const char* key : {"dataset", "vocab_file", "tokenizer_file", "train_file", "train_files", "embedded_chars"}) {
    if (section_value(a, "data", key) != section_value(b, "data", key)) return false;
  }
  return data_kind(a) != "the embedded text" || section_value(a, "train", "seed") == section_value(b, "train", "seed");
}

bool matches_one(const nlohmann::json& file, const std::vector<nlohmann::json>& among) {
  for (const nlohmann::json& f : among) {
    if (f.value("bytes", std::int64_t{-1}) >= 0 && same_contents(file, f)) return true;
  }
  return false;
}

}  // namespace

std::string checkpoint_text_dir(const std::string& run_dir, const std::string& checkpoint,
                                const nlohmann::json& data_identity, const nlohmann::json& checkpoint_config,
                                std::string& note) {
  // Only a checkpoint a later run set aside: in its own folder a checkpoint is the run directory's
  // trajectory's (a resume that changed the vocabulary says so when it resumes).
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(fs::absolute(checkpoint, ec), ec);
  if (run_dir.empty() || canonical.parent_path().filename() != "superseded") return run_dir;
  std::vector<nlohmann::json> copies;  // the run directory's: what the later run wrote there
  for (const char* name : {"vocab.json", "tokenizer.json"}) {
    if (fs::exists(fs::path(run_dir) / name, ec)) copies.push_back(file_identity((fs::path(run_dir) / name).string()));
  }
  if (copies.empty()) return run_dir;
  std::vector<nlohmann::json> recorded;
  if (data_identity.is_array()) {
    for (const nlohmann::json& f : data_identity) {
      if (!f.is_object() || f.value("bytes", std::int64_t{-1}) < 0 || !f.contains("fingerprint")) continue;
      // An identity from before splits were recorded lists the vocabulary among its files: known
      // by the names the readers take (an upgrade trial's set-aside checkpoint was refused as one
      // with "no vocabulary file recorded", its dataset's vocab.json unchanged beside it).
      const std::string name = fs::path(f.value("path", "")).filename().string();
      const bool vocabulary =
          f.contains("split") ? f.value("split", "") == kVocabSplit : name == "vocab.json" || name == "tokenizer.json";
      if (vocabulary) recorded.push_back(f);
    }
  }
  if (recorded.empty()) {
    const nlohmann::json current = read_json_or_null((fs::path(run_dir) / "config.json").string());
    if (!current.is_object() || same_vocabulary_source(current, checkpoint_config)) return run_dir;
    throw_input_error(
        "{} trained on {}, and its run directory {} now holds a later run's vocabulary, on other data: its tokens "
        "would be read as that vocabulary's text{}",
        checkpoint, data_kind(checkpoint_config), run_dir,
        data_kind(checkpoint_config) == "the embedded text" ? "" : " (sample --tokenizer or --vocab can name its own)");
  }
  const nlohmann::json* differs = nullptr;
  for (const nlohmann::json& f : recorded) {
    if (!matches_one(f, copies)) differs = differs ? differs : &f;
  }
  if (differs == nullptr) return run_dir;
  // The recorded file, where it still holds what the checkpoint trained with: read from its folder,
  // which the readers search by these names alone, tokenizer.json before vocab.json: a recorded
  // vocab.json only where a tokenizer.json beside it is recorded too (not someone else's, which the
  // readers would take instead). A vocab.json beside a recorded tokenizer.json is never read (an
  // HF GPT-2 folder's, beside the shards).
  const fs::path path = differs->value("path", "");
  const std::string name = path.filename().string();
  bool usable = (name == "vocab.json" || name == "tokenizer.json") && same_contents(*differs, file_identity(path));
  if (const fs::path beside = path.parent_path() / "tokenizer.json";
      usable && name == "vocab.json" && fs::exists(beside, ec)) {
    usable = matches_one(file_identity(beside.string()), recorded);
  }
  if (usable) {
    note = fmt::format("{}'s vocabulary is {} (its run directory {} holds a later run's): read from there", checkpoint,
                       path.string(), run_dir);
    return path.parent_path().string();
  }
  throw_input_error(
      "{} trained with the vocabulary {} ({}), but its run directory {} holds a later run's, and {}: its tokens would "
      "be read as another vocabulary's text (sample --tokenizer or --vocab can name its own)",
      checkpoint, path.string(), describe_contents(*differs), run_dir,
      path.is_relative() && !fs::exists(path, ec) ? "that path, relative to where that run started, is not here"
      : name != "vocab.json" && name != "tokenizer.json" && same_contents(*differs, file_identity(path))
          ? "that file is not one the readers find by name"
          : "that file is gone or changed");
}

}  // namespace zt
