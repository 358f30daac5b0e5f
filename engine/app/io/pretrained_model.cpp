// The model a pretrained checkpoint holds (see the header): a Hugging Face folder's config.json
// (and generation_config.json) through its family, or an llm.c model file's header.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "engine/app/io/input_file.h"
#include "engine/app/io/json_file.h"
#include "engine/app/io/llmc_model_file.h"
#include "engine/app/io/output_file.h"
#include "engine/app/io/pretrained.h"
#include "engine/app/io/weights_location.h"
#include "engine/base/core/check.h"
#include "models/model_family.h"

namespace zt {

namespace {

namespace fs = std::filesystem;

constexpr const char* kZerotrainAdvice =
    "(train --resume and eval/sample --run or --ckpt read zerotrain's own; `zerotrain ckpt export CHECKPOINT "
    "--format hf --out DIR` makes a Hugging Face folder of a checkpoint)";

// What zerotrain wrote at `path`, where that is not pretrained weights ("" otherwise): a user
// pointing train.init_from at a run of their own is told how to make a folder of it.
std::string zerotrain_output_kind(const fs::path& path) {
  switch (const WeightsAt at = weights_at(path.string())) {
    case WeightsAt::kCheckpoint:
    case WeightsAt::kCheckpointFolder:
    case WeightsAt::kRunDirectory: return weights_at_name(at);
    case WeightsAt::kFile:
    case WeightsAt::kHuggingFaceFolder:
    case WeightsAt::kNothingKnown: break;
  }
  return "";
}

// Whether the file's first word is llm.c's magic: a damaged llm.c model file, whose own fault its
// reader names, wherever it lies.
bool opens_with_llmc_magic(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;  // a FIFO's open would wait for a writer
  std::ifstream in(path, std::ios::binary);
  std::int32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), sizeof(magic)) && magic == kLlmcModelMagic;
}

// Whether a regular file begins as safetensors do: an 8-byte header length that the file holds,
// then the header's JSON object (a model.safetensors under another name, a symlink to one).
bool looks_like_safetensors(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  const std::uintmax_t size = fs::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  unsigned char head[9] = {0};
  if (ec || !in.read(reinterpret_cast<char*>(head), sizeof(head))) return false;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | head[i];
  return head[8] == '{' && n >= 2 && n <= size - 8;
}

// What a file that is no llm.c model file is instead, where its folder or its name says ("" where
// neither does): a file of a Hugging Face folder or of zerotrain's output, whose folder is what
// reads; a lone safetensors file.
std::string file_instead(const fs::path& path) {
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  switch (const WeightsAt around = weights_at(folder.string())) {
    case WeightsAt::kHuggingFaceFolder:
      return fmt::format("a file of the Hugging Face folder {}, which is what reads: give the folder", folder.string());
    case WeightsAt::kCheckpoint:
    case WeightsAt::kCheckpointFolder:  // its `latest`
    case WeightsAt::kRunDirectory:
      return fmt::format("a file of {} {}, not a Hugging Face folder or an llm.c model file {}",
                         weights_at_name(around), folder.string(), kZerotrainAdvice);
    case WeightsAt::kFile:
    case WeightsAt::kNothingKnown: break;
  }
  return path.extension() == ".safetensors" || looks_like_safetensors(path.string())
             ? "a safetensors file (a Hugging Face folder holds it beside its config.json), not a Hugging Face "
               "folder or an llm.c model file"
             : "";
}

}  // namespace

PretrainedModel read_pretrained_model(const std::string& path) {
  // A path whose status cannot be read (a loop of symlinks): said as such, not as a filesystem
  // exception's line without the key that named it.
  std::error_code status_ec;
  static_cast<void>(fs::status(path, status_ec));
  if (status_ec && status_ec != std::errc::no_such_file_or_directory) {
    throw_input_error("{}: cannot be read: {}", path, status_ec.message());
  }
  if (const std::string kind = zerotrain_output_kind(path); !kind.empty()) {
    throw_input_error("{}: {}, not a Hugging Face folder or an llm.c model file {}", path, kind, kZerotrainAdvice);
  }
  if (fs::is_directory(path)) {
    // An export into it cut between its renames: its files may be of two exports (or the config gone).
    std::error_code marker_ec;
    if (const fs::path marker = fs::path(path) / kIncompleteOutputMarker; fs::exists(marker, marker_ec)) {
      throw_input_error("{}: {} is there: an export into that folder was cut before it was whole; run the export again",
                        path, marker.string());
    }
    const std::string config = (fs::path(path) / "config.json").string();
    if (!fs::exists(config)) throw_input_error("{}: a Hugging Face folder needs a config.json", path);
    const nlohmann::json hf = read_json_file(config);
    if (!hf.is_object() || !hf.contains("model_type") || !hf["model_type"].is_string()) {
      throw_input_error("{}: no \"model_type\" string", config);
    }
    const ModelFamily& family = model_family_for_hf(hf["model_type"].get<std::string>(), config);
    // Only named in the description: anything but a list of strings is read as none.
    const nlohmann::json archs = hf.value("architectures", nlohmann::json::array());
    const std::string arch = archs.is_array() && !archs.empty() && archs[0].is_string()
                                 ? archs[0].get<std::string>()
                                 : hf["model_type"].get<std::string>();
    nlohmann::json keys = family.model_keys_from_hf(hf, config);
    // The special tokens' ids the run carries into its exports: a token of the vocabulary, or a
    // list of them (an instruct model's eos_token_id names each token its turns end with), else none.
    const std::int64_t vocab = keys.value("vocab_size", std::int64_t{0});
    const auto in_vocabulary = [vocab](const nlohmann::json& id) {
      return id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() < vocab;
    };
    // A list keeps its members in the vocabulary (generate stops at each of those), null if none is.
    const auto in_vocabulary_ids = [&](const nlohmann::json& id) -> nlohmann::json {
      nlohmann::json kept = nlohmann::json::array();
      for (const nlohmann::json& one : id.is_array() ? id : nlohmann::json::array({id})) {
        if (in_vocabulary(one)) kept.push_back(one);
      }
      if (kept.empty()) return nullptr;
      return id.is_array() ? kept : kept[0];
    };
    nlohmann::json ids = nlohmann::json::object();
    for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
      if (!hf.contains(key)) continue;
      if (nlohmann::json kept = in_vocabulary_ids(hf[key]); !kept.is_null()) ids[key] = std::move(kept);
    }
    // generate stops where the generation config says, which from_pretrained reads from
    // generation_config.json where the folder has one (an instruct model lists every end of turn
    // there), its eos_token_id alone (absent or null: none), and from config.json where it has none
    // or the file does not parse (transformers then falls back to the model's config). So do
    // sample --from and a run started from the folder, whose samples stop there and whose export's
    // config.json carries the ids.
    // Read as every input is (a FIFO hung every command that reads the folder; a directory failed
    // with the stream's words, exit 1).
    const fs::path generation = fs::path(path) / "generation_config.json";
    std::error_code ec;
    const nlohmann::json doc =
        fs::exists(generation, ec)  // a dangling link: none, as transformers falls back
            ? nlohmann::json::parse(read_whole_input(generation.string(), "generation config"), nullptr,
                                    /*allow_exceptions=*/false)
            : nlohmann::json();
    if (doc.is_object()) {
      const nlohmann::json eos = doc.contains("eos_token_id") ? in_vocabulary_ids(doc["eos_token_id"]) : nullptr;
      if (eos.is_null()) {
        ids.erase("eos_token_id");
      } else {
        ids["eos_token_id"] = eos;
      }
    }
    return {std::move(keys), fmt::format("Hugging Face {} folder {}", arch, path), config, ids};
  }
  if (!fs::exists(path)) throw_input_error("{}: no such Hugging Face folder or llm.c model file", path);
  // Any padding of the vocabulary (llm.c's train_gpt2.py rounds up to 128, zerotrain to 64): the
  // reader takes the true vocabulary's rows, where the tensors' offsets follow the header's.
  // An llm.c model file reads wherever it lies (a damaged one says its fault); another file is named
  // for what it is where that is known, rather than for the llm.c header it lacks.
  LlmcModelHeader h;
  try {
    h = read_llmc_model_header(path);
  } catch (const InputError&) {
    if (const std::string instead = file_instead(path); !instead.empty() && !opens_with_llmc_magic(path)) {
      throw_input_error("{}: {}", path, instead);
    }
    throw;
  }
  return {{{"arch", "gpt2"},
           {"n_layer", h.n_layer},
           {"n_head", h.n_head},
           {"n_embd", h.n_embd},
           {"block_size", h.max_t},
           {"vocab_size", h.vocab}},
          fmt::format("llm.c model file {} ({})", path, h.dtype == DType::kBF16 ? "bf16" : "fp32"),
          path};
}

}  // namespace zt
