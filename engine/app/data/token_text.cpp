// TokenText: a tokenizer.json, a vocab.json, or neither (see the header).
#include "engine/app/data/token_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/app/data/vocab_tokenizer_json.h"
#include "engine/app/io/json_file.h"
#include "engine/base/core/check.h"

namespace zt::data {

void copy_tokenizer_files(const std::string& tokenizer, const std::string& dir) {
  if (tokenizer.empty()) return;
  const std::filesystem::path src(tokenizer), to(dir);
  for (std::size_t i = 0; i < std::size(kTokenizerFiles); ++i) {
    const char* f = kTokenizerFiles[i];
    const std::filesystem::path from = i == 0 ? src : src.parent_path() / f;  // tokenizer.json: the one named
    if (i > 0 && !std::filesystem::exists(from)) continue;
    std::error_code ec;
    std::filesystem::copy_file(from, to / f, std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) throw_input_error("cannot copy {} into the run directory {}: {}", from.string(), dir, ec.message());
  }
}

TokenText TokenText::from_dir(const std::string& dir) {
  const std::filesystem::path d(dir);
  if (std::filesystem::exists(d / "tokenizer.json")) return from_tokenizer_file((d / "tokenizer.json").string());
  if (std::filesystem::exists(d / "vocab.json")) return TokenText(Vocab::load((d / "vocab.json").string()));
  return {};
}

namespace {

// The bos_token a tokenizer_config.json in `dir` names (a string, or an added token's {"content"}),
// if it reads; any fault in it is left to the export, which refuses it by name.
std::optional<std::string> config_bos_token(const std::filesystem::path& dir) {
  std::error_code ec;
  const std::filesystem::path config = (dir.empty() ? std::filesystem::path(".") : dir) / "tokenizer_config.json";
  if (!std::filesystem::is_regular_file(config, ec)) return std::nullopt;
  std::ifstream in(config);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("bos_token")) return std::nullopt;
  const nlohmann::json& bos = doc["bos_token"];
  if (bos.is_string()) return bos.get<std::string>();
  if (bos.is_object() && bos.contains("content") && bos["content"].is_string())
    return bos["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

TokenText TokenText::from_tokenizer_file(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  if (std::optional<Vocab> chars = char_vocab_of_tokenizer_json(j, path)) return TokenText(std::move(*chars));
  Tokenizer t = Tokenizer::from_json(j, path);
  // A document's start as transformers' generate takes it: the bos_token that a
  // tokenizer_config.json beside it names (the id its export's config.json carries), where the
  // tokenizer has it. Without one, the tokenizer's own delimiter (Tokenizer::encode_prompt).
  if (const std::optional<std::string> bos = config_bos_token(std::filesystem::path(path).parent_path())) {
    if (const std::optional<std::int32_t> id = t.token_id(*bos)) t.set_document_start(*id);
  }
  return TokenText(std::move(t));
}

std::vector<std::int32_t> TokenText::encode_prompt(std::string_view text) const {
  if (tokenizer_) return tokenizer_->encode_prompt(text);
  std::vector<std::int32_t> ids;
  if (vocab_) {
    for (const std::uint16_t t : vocab_->encode(text)) ids.push_back(t);
  }
  return ids;
}

std::string TokenText::decode(std::span<const std::int32_t> ids) const {
  if (tokenizer_) return tokenizer_->decode(ids);
  if (vocab_) return vocab_->decode(ids);
  return fmt::format("{}", fmt::join(ids, " "));
}

int TokenText::size() const { return tokenizer_ ? tokenizer_->vocab_size() : vocab_ ? vocab_->size() : 0; }

std::vector<bool> TokenText::decodable() const {
  if (!tokenizer_) return {};
  std::vector<bool> ids(static_cast<std::size_t>(tokenizer_->vocab_size()));
  bool gaps = false;
  for (std::int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    ids[static_cast<std::size_t>(id)] = tokenizer_->has_id(id);
    gaps |= !ids[static_cast<std::size_t>(id)];
  }
  return gaps ? ids : std::vector<bool>{};
}

}  // namespace zt::data
