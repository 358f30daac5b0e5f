// TokenText: a tokenizer.json, a vocab.json, or neither (see the header).
#include "engine/app/data/token_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/app/data/vocab_tokenizer_json.h"
#include "engine/app/io/json_file.h"

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
  return TokenText(Tokenizer::from_json(j, path));
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

}  // namespace zt::data
