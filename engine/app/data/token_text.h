// What turns text into a run's token ids and back for prompts and samples: a Hugging Face
// tokenizer.json (byte-level BPE, data/tokenizer.h; or an exported character vocabulary), or
// zerotrain's own vocab.json (character or byte level, data/vocab.h); with neither, ids are
// printed as numbers and a prompt is empty.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/app/data/tokenizer.h"
#include "engine/app/data/vocab.h"

namespace zt::data {

// The files a Hugging Face tokenizer is made of, tokenizer.json first: a run keeps the ones beside
// its tokenizer, and ckpt export copies the run's into its folder.
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"};

// `tokenizer` (a tokenizer.json; nothing where empty) as dir/tokenizer.json, and the other
// kTokenizerFiles lying beside it into `dir`: a run's directory, where sample reads them and ckpt
// export copies them from. InputError naming the file that cannot be copied.
void copy_tokenizer_files(const std::string& tokenizer, const std::string& dir);

class TokenText {
 public:
  TokenText() = default;
  explicit TokenText(Tokenizer t) : tokenizer_(std::move(t)) {}
  explicit TokenText(Vocab v) : vocab_(std::move(v)) {}
  // dir/tokenizer.json, else dir/vocab.json, else neither.
  static TokenText from_dir(const std::string& dir);
  // A tokenizer.json: a byte-level BPE's Tokenizer, or the character vocabulary an export of a
  // character-level run writes as one (data/vocab_tokenizer_json.h).
  static TokenText from_tokenizer_file(const std::string& path);

  bool has() const { return tokenizer_.has_value() || vocab_.has_value(); }
  bool is_tokenizer() const { return tokenizer_.has_value(); }  // a byte-level BPE's, not a vocabulary
  // A prompt's tokens: a tokenizer.json's Tokenizer::encode_prompt (its template's leading special
  // tokens, then the text's; only those for an empty text), a vocabulary's, or none.
  std::vector<std::int32_t> encode_prompt(std::string_view text) const;
  // The text of the ids, or the ids as numbers separated by spaces.
  std::string decode(std::span<const std::int32_t> ids) const;
  // The ids it can decode (0 without one): sampling draws below it.
  int size() const;
  // Which ids below size() it decodes, where some it does not (a tokenizer whose ids skip
  // numbers); empty where it decodes all (a vocabulary, a tokenizer without gaps, none).
  std::vector<bool> decodable() const;

 private:
  std::optional<Tokenizer> tokenizer_;
  std::optional<Vocab> vocab_;
};

}  // namespace zt::data
