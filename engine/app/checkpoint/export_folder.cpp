// What an HF export writes beside its tensors (the run's tokenizer files) and which folders it may
// write into: its own earlier export's, or a new or empty one.
#include "engine/app/checkpoint/export_folder.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/data/special_tokens.h"
#include "engine/app/data/token_file.h"
#include "engine/app/data/token_text.h"
#include "engine/app/data/vocab_tokenizer_json.h"
#include "engine/app/io/input_file.h"
#include "engine/app/io/json_file.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/safetensors.h"
#include "engine/base/core/check.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

// Whether the safetensors file at `path` is an export's: its metadata name this tool, or, from
// before they did (`legacy`: the folder's config.json is not save_pretrained's, which always
// records transformers_version), are transformers' own {"format": "pt"} alone. Unreadable: no.
bool written_by_export(const fs::path& path, bool legacy) {
  try {
    const SafetensorsHeader header = read_safetensors_header(path.string());
    const nlohmann::json meta = header.json.value("__metadata__", nlohmann::json::object());
    if (!meta.is_object()) return false;
    if (meta.contains(kExportedByKey)) return meta[kExportedByKey] == kExportedBy;
    return legacy && meta == nlohmann::json{{"format", "pt"}};
  } catch (const InputError&) {
    return false;
  }
}

}  // namespace

std::string tokenizer_crc_list(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string list;
  for (const auto& [name, text] : files) {
    list += fmt::format("{}{}:{:08x}", list.empty() ? "" : ",", name,
                        crc32_update(0, text.data(), static_cast<std::int64_t>(text.size())));
  }
  return list;
}

EarlierTokenizerFiles earlier_export_tokenizer_files(const fs::path& out_dir) {
  // Over every tensor file an export wrote: an export cut between its renames may leave shards of
  // two exports, each naming its own (and its crc32s: a file either wrote is as written), and the
  // earlier export's files it was replacing, kept as NAME.zt-replaced (StagedFiles::commit) beside
  // that export's tokenizer files not yet replaced.
  std::string lists, crcs;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool tensors =
        name.ends_with(".safetensors") || name.ends_with(".safetensors" + std::string(kReplacedSuffix));
    if (!tensors || !written_by_export(e.path(), /*legacy=*/false)) continue;
    try {
      const nlohmann::json meta =
          read_safetensors_header(e.path().string()).json.value("__metadata__", nlohmann::json::object());
      if (!meta.is_object()) continue;
      if (meta.contains(kTokenizerFilesKey) && meta[kTokenizerFilesKey].is_string()) {
        lists.append(",").append(meta[kTokenizerFilesKey].get<std::string>());
      }
      if (meta.contains(kTokenizerCrcKey) && meta[kTokenizerCrcKey].is_string()) {
        crcs.append(",").append(meta[kTokenizerCrcKey].get<std::string>());
      }
    } catch (const InputError&) {}
  }
  lists.append(",");
  crcs.append(",");
  EarlierTokenizerFiles files;
  for (const char* f : data::kTokenizerFiles) {  // only a tokenizer file's name: nothing else is removed
    const fs::path path = out_dir / f;
    if (lists.find(std::string(",").append(f).append(",")) == std::string::npos || !fs::exists(path, ec)) continue;
    // Recorded without a crc32 (an export from before them): as written, as those exports took it.
    // Not a file (a directory of its name): left to the renames, which refuse it by name.
    const std::string crc_item = std::string(",").append(f).append(":");
    bool as_written = crcs.find(crc_item) == std::string::npos || !fs::is_regular_file(path, ec);
    if (!as_written) {
      const std::string text = read_whole_input(path.string(), "--out");
      const std::string now = tokenizer_crc_list({{f, text}});
      as_written = crcs.find("," + now + ",") != std::string::npos;
    }
    (as_written ? files.written : files.edited).emplace_back(f);
  }
  return files;
}

bool is_init_from(const std::string& out_dir, const Manifest& manifest) {
  const nlohmann::json& train = manifest.config.value("train", nlohmann::json::object());
  for (const std::string& p : {extra_string(manifest.extra, "init_from_path"),
                               train.is_object() && train.contains("init_from") && train["init_from"].is_string()
                                   ? train["init_from"].get<std::string>()
                                   : std::string()}) {
    std::error_code ec;
    if (!p.empty() && fs::exists(p, ec) && fs::equivalent(out_dir, p, ec)) return true;
  }
  return false;
}

TokenizerFiles export_tokenizer_files(const fs::path& run_dir, const ModelSpec& spec) {
  TokenizerFiles out;
  for (const char* f : data::kTokenizerFiles) {
    if (fs::exists(run_dir / f)) out.files.emplace_back(f, read_whole_input((run_dir / f).string(), "tokenizer file"));
  }
  // Read as sample and the run read it: a tokenizer.json that is none zerotrain reads (replaced or
  // damaged since the run: a WordPiece model, merges that are no list) was exported, exit 0.
  if (fs::exists(run_dir / "tokenizer.json")) {
    try {
      (void)data::TokenText::from_tokenizer_file((run_dir / "tokenizer.json").string());
    } catch (const InputError& e) {
      throw_input_error("the run's tokenizer is not one it could have trained with: {}", e.what());
    }
  }
  // The run's tokenizer_config.json as it is, but for the inputs its tokenizer returns: the generic
  // fast class (PreTrainedTokenizerFast, what a tokenizers-library save names) returns
  // token_type_ids too, which a causal LM's generate(**tokenizer(text)) refuses. A config that names
  // its own keeps them.
  // Inserted as text after its opening brace, the rest byte for byte (a parse and dump would turn
  // model_max_length's 1000000000000000019884624838656 into a float, and escapes into text).
  for (auto& [name, text] : out.files) {
    if (name != "tokenizer_config.json") continue;
    const nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    const std::size_t brace = text.find('{');
    if (!config.is_object() || config.contains("model_input_names") || brace == std::string::npos) continue;
    const bool empty = config.empty();
    text.insert(brace + 1,
                std::string("\n  \"model_input_names\": [\"input_ids\", \"attention_mask\"]") + (empty ? "\n" : ","));
  }
  // A tokenizer.json alone (the tokenizers library's save): a tokenizer_config.json naming the
  // generic fast class and the delimiters config.json numbers, so that AutoTokenizer neither takes
  // the model type's class nor adds its default special tokens past the model's vocabulary.
  if (fs::exists(run_dir / "tokenizer.json") && !fs::exists(run_dir / "tokenizer_config.json")) {
    nlohmann::ordered_json config = data::fast_tokenizer_config(spec.model.block_size);
    const nlohmann::json delimiters = data::document_delimiter_tokens(run_dir.string());
    for (const auto& [key, token] : delimiters.items()) config[key] = token;
    out.files.emplace_back("tokenizer_config.json", config.dump(2) + "\n");
  }
  if (out.files.empty() && fs::exists(run_dir / "vocab.json")) {
    const data::Vocab vocab = data::Vocab::load((run_dir / "vocab.json").string());
    out.files = {{"tokenizer.json", data::tokenizer_json_of_vocab(vocab).dump(2) + "\n"},
                 {"tokenizer_config.json", data::fast_tokenizer_config(spec.model.block_size).dump(2) + "\n"}};
    out.from_vocab = true;
  }
  return out;
}

// The export replaces the folder's config.json and its tensor files. Right for an earlier export;
// anything else there is someone else's model or file, and would be lost (or mixed with this
// model's: a foreign tokenizer, pytorch_model.bin): refused, before anything is written. So is the
// folder the run started from (train.init_from), even where an earlier export wrote it.
void check_hf_export_folder(const std::string& out_dir, const Manifest& manifest, const TokenizerFiles& tokenizer) {
  std::error_code ec;
  if (is_init_from(out_dir, manifest)) {
    throw_input_error(
        "--out {} is the folder this run started from (train.init_from): the export would replace its pretrained "
        "weights; export to another folder",
        out_dir);
  }
  if (!fs::is_directory(out_dir, ec)) return;
  const fs::path config = fs::path(out_dir) / "config.json";
  std::string why;
  bool legacy = false;  // a config.json an earlier export may have written
  if (fs::exists(config, ec)) {
    try {
      const nlohmann::json doc = read_json_file(config.string());
      if (!doc.is_object() || !doc.contains("model_type")) why = "a config.json that is not a Hugging Face model's";
      legacy = doc.is_object() && !doc.contains("transformers_version");
    } catch (const InputError& e) {
      why = fmt::format("a config.json that is not a Hugging Face model's ({})", e.what());
    }
  }
  // An export that names itself names every tensor file it writes: beside one of those, a file with
  // transformers' metadata alone is someone's shard (a save_pretrained's), not a legacy export's.
  for (const fs::directory_entry& e : fs::directory_iterator(out_dir, ec)) {
    if (legacy && e.path().filename().string().ends_with(".safetensors") &&
        written_by_export(e.path(), /*legacy=*/false)) {
      legacy = false;
    }
  }
  // Its tensor files must be an earlier export's, config.json or none (an export cut between its
  // renames leaves none; without one, only the metadata naming this tool tell).
  for (const fs::directory_entry& e : fs::directory_iterator(out_dir, ec)) {
    if (!why.empty()) break;
    const std::string name = e.path().filename().string();
    const bool foreign = name.ends_with(".safetensors")
                             ? !written_by_export(e.path(), legacy)
                             : name.ends_with(".bin") || name.ends_with(".pt") || name.ends_with(".pth") ||
                                   name.ends_with(".h5") || name.ends_with(".msgpack") || name.ends_with(".gguf");
    // A tokenized corpus's shard is no model: the export's tokenizer.json would replace the one the
    // shards were encoded with.
    if (foreign && name.ends_with(".bin") && data::llmc_token_magic(e.path().string()) != 0) {
      why = fmt::format(
          "a token shard ({}: a tokenized corpus's folder, whose tokenizer.json the export would replace)", name);
    } else if (foreign) {
      why = fmt::format("a model that no export wrote ({})", name);
    }
  }
  // A tokenizer belongs to the model beside it: one in a folder with no earlier export's tensors
  // is someone else's (the export would overwrite it, or leave it to number this model's tokens),
  // unless it is the very file this export writes (an export of this run cut before its tensors
  // took their names: the next one completes it).
  bool earlier_export = false;
  for (const fs::directory_entry& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".safetensors") && written_by_export(e.path(), legacy)) earlier_export = true;
  }
  auto ours = [&](const char* f) {
    for (const auto& [name, text] : tokenizer.files) {
      if (name == f)
        return fs::file_size(fs::path(out_dir) / f, ec) == text.size() && !ec &&
               read_whole_input((fs::path(out_dir) / f).string(), "--out") == text;
    }
    return false;
  };
  // Beside an earlier export, one this export would write over that no export recorded writing is
  // the user's, or an export's from before exports recorded them (c5ff5dc): an upgrade trial's was
  // replaced in silence. Those this export does not write stay, and are named.
  // One an earlier export wrote and the user changed since is the user's too.
  const EarlierTokenizerFiles recorded =
      earlier_export ? earlier_export_tokenizer_files(out_dir) : EarlierTokenizerFiles{};
  auto writes = [&](const char* f) {
    return std::any_of(tokenizer.files.begin(), tokenizer.files.end(),
                       [&](const auto& file) { return file.first == f; });
  };
  auto listed = [](const std::vector<std::string>& names, const char* f) {
    return std::find(names.begin(), names.end(), f) != names.end();
  };
  for (const char* f : data::kTokenizerFiles) {
    if (!fs::exists(fs::path(out_dir) / f, ec) || ours(f)) continue;  // ours reads the file: once
    if (!earlier_export) {
      if (why.empty()) why = fmt::format("a tokenizer that no export wrote ({})", f);
      continue;
    }
    if (writes(f) && listed(recorded.edited, f)) {
      // After exports cut while replacing others (their marker there), the record of the one that
      // wrote it may be gone with its set-aside tensors: not necessarily the user's edit.
      const bool cut = fs::exists(fs::path(out_dir) / kIncompleteOutputMarker, ec);
      throw_input_error(
          "--out {} holds a {} {}, which this export would replace with the run's: move it away to export here",
          out_dir, f,
          cut ? "that no export's record there matches (your edit, or the file of an export whose record went "
                "with the exports cut while replacing it)"
              : "changed since the export that wrote it (your edit)");
    }
    if (writes(f) && !listed(recorded.written, f)) {
      throw_input_error(
          "--out {} holds a {} no export recorded writing (yours, or an export's from before exports recorded "
          "them), which this export would replace with the run's: move it away to export here",
          out_dir, f);
    }
  }
  if (!why.empty()) {
    throw_input_error(
        "--out {} holds {}: the export's files would replace or mix with it; export into a new or empty folder, "
        "or over an earlier export",
        out_dir, why);
  }
}

}  // namespace zt::ckpt
