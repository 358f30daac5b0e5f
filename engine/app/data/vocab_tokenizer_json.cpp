// zerotrain vocabularies as Hugging Face tokenizer.json files and back (see the header).
#include "engine/app/data/vocab_tokenizer_json.h"

#include <vector>

#include "engine/app/data/tokenizer.h"
#include "engine/base/core/check.h"

namespace zt::data {

namespace {

// The fields of tokenizer.json that the library writes for every tokenizer, around a BPE model.
nlohmann::ordered_json bpe_tokenizer(nlohmann::ordered_json vocab, nlohmann::ordered_json pre_tokenizer,
                                     nlohmann::ordered_json decoder) {
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", nlohmann::ordered_json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", std::move(pre_tokenizer)},
          {"post_processor", nullptr},
          {"decoder", std::move(decoder)},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", std::move(vocab)},
            {"merges", nlohmann::ordered_json::array()}}}};
}

}  // namespace

nlohmann::ordered_json tokenizer_json_of_vocab(const Vocab& vocab) {
  nlohmann::ordered_json ids = nlohmann::ordered_json::object();
  if (vocab.kind() == Vocab::Kind::kByte) {
    for (int b = 0; b < 256; ++b) ids[byte_level_chars()[static_cast<std::size_t>(b)]] = b;
    const nlohmann::ordered_json byte_level = {
        {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
    return bpe_tokenizer(std::move(ids), byte_level, byte_level);
  }
  for (std::size_t i = 0; i < vocab.pieces().size(); ++i) ids[vocab.pieces()[i]] = i;
  return bpe_tokenizer(std::move(ids), nullptr, {{"type", "Fuse"}});
}

nlohmann::ordered_json fast_tokenizer_config(int model_max_length) {
  // model_input_names: the generic class also returns token_type_ids, which generate(**inputs)
  // refuses for a causal model.
  return {{"tokenizer_class", "PreTrainedTokenizerFast"},
          {"model_max_length", model_max_length},
          {"model_input_names", {"input_ids", "attention_mask"}},
          {"clean_up_tokenization_spaces", false}};
}

std::optional<Vocab> char_vocab_of_tokenizer_json(const nlohmann::json& j, const std::string& path) {
  const auto is_null = [&](const char* key) { return !j.contains(key) || j[key].is_null(); };
  // An object's "type" where it is a string, else "" (a number there threw the library's type error).
  const auto type_of = [](const nlohmann::json& o) {
    return o.is_object() && o.contains("type") && o["type"].is_string() ? o["type"].get<std::string>() : "";
  };
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object() || !is_null("pre_tokenizer") ||
      !is_null("normalizer") || !is_null("post_processor") || !j.contains("decoder") ||
      type_of(j["decoder"]) != "Fuse") {
    return std::nullopt;
  }
  const nlohmann::json& model = j["model"];
  const nlohmann::json added = j.value("added_tokens", nlohmann::json::array());
  if (type_of(model) != "BPE" || !model.contains("vocab") || !model["vocab"].is_object() ||
      !model.value("merges", nlohmann::json::array()).empty() || !added.empty()) {
    return std::nullopt;
  }
  std::vector<std::string> tokens(model["vocab"].size());
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
        id.get<std::int64_t>() >= static_cast<std::int64_t>(tokens.size()) || !tokens[id.get<std::size_t>()].empty()) {
      throw_input_error("{}: a character tokenizer's ids must number its {} tokens 0..{} once each ('{}' has {})", path,
                        tokens.size(), tokens.size() - 1, token, id.dump());
    }
    tokens[id.get<std::size_t>()] = token;
  }
  return Vocab::from_chars(std::move(tokens), path);
}

}  // namespace zt::data
