// TokenText: a tokenizer.json, a vocab.json, or neither (see the header).
#include "engine/app/data/token_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/app/data/special_tokens.h"
#include "engine/app/data/vocab_tokenizer_json.h"
#include "engine/app/io/json_file.h"
#include "engine/base/core/check.h"

namespace zt::data {

TokenText TokenText::from_dir(const std::string& dir) {
  const std::filesystem::path d(dir);
  if (std::filesystem::exists(d / "tokenizer.json")) return from_tokenizer_file((d / "tokenizer.json").string());
  if (std::filesystem::exists(d / "vocab.json")) return TokenText(Vocab::load((d / "vocab.json").string()));
  return {};
}

TokenText TokenText::from_tokenizer_file(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  if (std::optional<Vocab> chars = char_vocab_of_tokenizer_json(j, path)) return TokenText(std::move(*chars));
  Tokenizer t = Tokenizer::from_json(j, path);
  // A document's start as transformers' generate takes it: the bos_token of the tokenizer_config.json
  // beside it (the id its export's config.json carries). One that does not read leaves the
  // tokenizer's own delimiter (an export refuses it, naming it).
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (std::filesystem::path(path).filename() == "tokenizer.json") {
    try {
      const nlohmann::json ids = special_token_ids(dir.empty() ? "." : dir.string());
      if (ids.contains("bos_token_id") && ids["bos_token_id"].is_number_integer()) {
        t.set_document_start(ids["bos_token_id"].get<std::int32_t>());
      }
    } catch (const InputError&) {}
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
