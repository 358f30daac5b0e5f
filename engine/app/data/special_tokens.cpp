// Special tokens' ids from a tokenizer folder (see the header).
#include "engine/app/data/special_tokens.h"

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "engine/app/io/json_file.h"
#include "engine/base/core/check.h"

namespace zt::data {

namespace {

// tokenizer_config.json's value for a special token: its text, or nullopt when absent or null.
std::optional<std::string> token_text(const nlohmann::json& config, const char* key, const std::string& path) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();  // an AddedToken as transformers serialises it
  }
  throw_input_error("{}: {} must be a string or an object with a \"content\" string (got {})", path, key, it->dump());
}

// The token's id in tokenizer.json: an added token's first, as the library looks them up.
std::optional<std::int64_t> token_id(const nlohmann::json& tokenizer, const std::string& text) {
  for (const nlohmann::json& t : tokenizer.value("added_tokens", nlohmann::json::array())) {
    if (t.value("content", "") == text && t.contains("id") && t["id"].is_number_integer()) {
      return t["id"].get<std::int64_t>();
    }
  }
  const auto model = tokenizer.find("model");
  if (model == tokenizer.end() || !model->is_object()) return std::nullopt;
  const auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object()) return std::nullopt;
  const auto id = vocab->find(text);
  if (id == vocab->end() || !id->is_number_integer()) return std::nullopt;
  return id->get<std::int64_t>();
}

// A tokenizer.json's document delimiters, by the ids' key: the first candidate it holds, each.
std::vector<std::pair<std::string, std::pair<std::string, std::int64_t>>> delimiters(const nlohmann::json& tokenizer) {
  std::vector<std::pair<std::string, std::pair<std::string, std::int64_t>>> found;
  for (const auto& [key, candidates] :
       {std::pair{"bos_token_id", std::array{"<|endoftext|>", "<|begin_of_text|>", "<s>"}},
        std::pair{"eos_token_id", std::array{"<|endoftext|>", "<|end_of_text|>", "</s>"}}}) {
    for (const char* text : candidates) {
      if (const std::optional<std::int64_t> id = token_id(tokenizer, text)) {
        found.push_back({key, {text, *id}});
        break;
      }
    }
  }
  return found;
}

nlohmann::json read_tokenizer(const std::string& path) {
  const nlohmann::json tokenizer = read_json_file(path);
  if (!tokenizer.is_object()) throw_input_error("{}: not a JSON object", path);
  return tokenizer;
}

nlohmann::json special_token_ids_or_throw(const std::string& dir) {
  const std::filesystem::path d(dir);
  const std::string config_path = (d / "tokenizer_config.json").string();
  const std::string tokenizer_path = (d / "tokenizer.json").string();
  nlohmann::json ids = nlohmann::json::object();
  if (!std::filesystem::exists(tokenizer_path)) return ids;
  const nlohmann::json tokenizer = read_tokenizer(tokenizer_path);
  if (!std::filesystem::exists(config_path)) {
    // A tokenizer.json alone (one trained with the tokenizers library): its document delimiter, the
    // token tools/prepare_tokens.py starts each document with, begins and ends the text.
    for (const auto& [key, token] : delimiters(tokenizer)) ids[key] = token.second;
    return ids;
  }
  const nlohmann::json config = read_json_file(config_path);
  if (!config.is_object()) throw_input_error("{}: not a JSON object", config_path);
  for (const char* name : {"bos", "eos", "pad"}) {
    const std::string key = std::string(name) + "_token";
    const std::optional<std::string> text = token_text(config, key.c_str(), config_path);
    if (!text) continue;
    if (const std::optional<std::int64_t> id = token_id(tokenizer, *text)) ids[key + "_id"] = *id;
  }
  return ids;
}

}  // namespace

nlohmann::json special_token_ids(const std::string& dir) {
  try {
    return special_token_ids_or_throw(dir);
  } catch (const nlohmann::json::exception& e) {  // a field of another type than the library writes
    throw_input_error("{}: its tokenizer files hold a special token this export cannot read ({})", dir, e.what());
  }
}

nlohmann::json document_delimiter_tokens(const std::string& dir) {
  const std::string tokenizer_path = (std::filesystem::path(dir) / "tokenizer.json").string();
  nlohmann::json tokens = nlohmann::json::object();
  if (!std::filesystem::exists(tokenizer_path)) return tokens;
  try {
    for (const auto& [key, token] : delimiters(read_tokenizer(tokenizer_path))) {
      tokens[key.substr(0, key.size() - 3)] = token.first;  // "bos_token_id" -> "bos_token"
    }
  } catch (const nlohmann::json::exception& e) {
    throw_input_error("{}: its tokenizer files hold a special token this export cannot read ({})", dir, e.what());
  }
  return tokens;
}

}  // namespace zt::data
