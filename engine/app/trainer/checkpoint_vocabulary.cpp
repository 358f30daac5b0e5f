// See the header.
#include "engine/app/trainer/checkpoint_vocabulary.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/app/trainer/run_identity.h"
#include "engine/base/core/check.h"

namespace zt {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json_or_null(const std::string& path) {
  std::ifstream in(path);
  return in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
}

// Whether two configs take their vocabulary from the same place: the data keys that name it (and,
// for the embedded text, the seed its text follows from). Other keys may differ between versions
// or by a resume's --allow-config-change.
bool same_vocabulary_source(const nlohmann::json& a, const nlohmann::json& b) {
  const auto at = [](const nlohmann::json& config, const char* section, const char* key) {
    const nlohmann::json s = config.is_object() ? config.value(section, nlohmann::json()) : nlohmann::json();
    return s.is_object() ? s.value(key, nlohmann::json()) : nlohmann::json();
  };
  for (const char* key : {"dataset", "vocab_file", "tokenizer_file", "train_file", "train_files", "embedded_chars"}) {
    if (at(a, "data", key) != at(b, "data", key)) return false;
  }
  return at(a, "data", "dataset") != "embedded" || at(a, "train", "seed") == at(b, "train", "seed");
}

}  // namespace

std::string checkpoint_text_dir(const std::string& run_dir, const nlohmann::json& data_identity,
                                const nlohmann::json& checkpoint_config, const std::string& checkpoint,
                                std::string& note) {
  if (run_dir.empty() || !data_identity.is_array()) return run_dir;
  std::vector<nlohmann::json> recorded;
  for (const nlohmann::json& f : data_identity) {
    if (f.is_object() && f.value("split", "") == kVocabSplit && f.contains("bytes") && f.contains("fingerprint") &&
        f.value("bytes", std::int64_t{-1}) >= 0) {
      recorded.push_back(f);
    }
  }
  std::vector<nlohmann::json> copies;  // the run directory's, which the run copied its vocabulary to
  for (const char* name : {"vocab.json", "tokenizer.json"}) {
    std::error_code ec;
    if (fs::exists(fs::path(run_dir) / name, ec)) copies.push_back(file_identity((fs::path(run_dir) / name).string()));
  }
  const nlohmann::json* differs = nullptr;
  for (const nlohmann::json& f : recorded) {
    bool copied = false;
    for (const nlohmann::json& c : copies)
      copied = copied || (c.value("bytes", std::int64_t{-1}) >= 0 && same_contents(f, c));
    if (!copied) {
      differs = &f;
      break;
    }
  }
  if (copies.empty()) return run_dir;
  // The copy is written again by the run (Vocab::save), not copied byte for byte: a vocab_file of
  // another layout differs in bytes alone. The directory's config.json taking its vocabulary from
  // where the checkpoint's does is the same vocabulary; another place is a later run's.
  const nlohmann::json current = read_json_or_null((fs::path(run_dir) / "config.json").string());
  const bool same_source = !current.is_object() || same_vocabulary_source(current, checkpoint_config);
  if (differs == nullptr && (!recorded.empty() || same_source)) return run_dir;
  if (differs == nullptr) {  // nothing recorded (the embedded text's, token ids alone), a later run's copy there
    const nlohmann::json data =
        checkpoint_config.is_object() ? checkpoint_config.value("data", nlohmann::json()) : nlohmann::json();
    const bool embedded = data.is_object() && data.value("dataset", "") == "embedded";
    throw_input_error(
        "{} trained on {}, and the run directory {} now holds a later run's vocabulary, on other data: its tokens "
        "would be read as that vocabulary's text",
        checkpoint, embedded ? "the embedded text" : "token ids with no vocabulary", run_dir);
  }
  if (same_source) return run_dir;
  const std::string path = differs->value("path", "");
  if (!path.empty() && same_contents(*differs, file_identity(path))) {
    note = fmt::format("{}'s vocabulary is {} (the run directory {} holds a later run's): read from there", checkpoint,
                       path, run_dir);
    return fs::path(path).parent_path().string();
  }
  throw_input_error(
      "{} trained with the vocabulary {} ({}), but the run directory {} holds another (a later run's there), and "
      "that file is gone or changed: its tokens would be read as another vocabulary's text",
      checkpoint, path, describe_contents(*differs), run_dir);
}

}  // namespace zt
