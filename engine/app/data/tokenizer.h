// A Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2's, Llama 3's, or one trained
// with the `tokenizers` library: model BPE, ByteLevel pre-tokenizer and decoder), read in C++ so
// `sample` encodes its prompt and decodes what it generates with the tokenizer the data was made
// with (tools/prepare_tokens.py). Encoding follows the library's steps: the added tokens are split
// out first, each stretch between them is cut by the pre-tokenizer's pattern (GPT-2's, or Llama
// 3's Split), mapped byte by byte to GPT-2's printable characters, and merged by the BPE merges in
// rank order. tests/data/tokenizer_test.py holds it equal to the library on a test corpus.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zt::data {

class Tokenizer {
 public:
  // InputError naming the file and what it holds that is not read here (another model type, a
  // normalizer, a pre-tokenizer pattern other than GPT-2's or Llama 3's).
  static Tokenizer load(const std::string& path);
  // The same, from the file's JSON already read (`path` names it in errors).
  static Tokenizer from_json(const nlohmann::json& j, const std::string& path);

  std::vector<std::int32_t> encode(std::string_view text) const;
  // A prompt to continue: encode's ids after the special tokens the tokenizer's template puts
  // before a sequence (its post_processor's TemplateProcessing, alone or in a Sequence: Llama 3's
  // <|begin_of_text|>), as the library's encode adds them by default; what the template puts after
  // a sequence is left out, since the prompt goes on. An empty prompt without such tokens is a
  // document's start alone: set_document_start's token where given (the folder's
  // tokenizer_config.json bos_token, where transformers' generate starts), else the document
  // delimiter (<|endoftext|>, <|begin_of_text|>, <|end_of_text|> or </s>, the first the tokenizer
  // has: what tools/prepare_tokens.py starts each document with by default).
  std::vector<std::int32_t> encode_prompt(std::string_view text) const;
  void set_document_start(std::int32_t id) { document_start_ = id; }
  // Ids outside the vocabulary are skipped; bytes that are not UTF-8 are kept as they are.
  std::string decode(std::span<const std::int32_t> ids) const;
  // One past the largest id (added tokens included).
  int vocab_size() const { return vocab_size_; }
  // Whether `id` names a token (a tokenizer's ids may skip numbers: added tokens far past its
  // vocabulary), which decode gives text for.
  bool has_id(std::int32_t id) const {
    const auto found = id_to_token_.find(id);
    return found != id_to_token_.end() && !found->second.empty();
  }
  std::optional<std::int32_t> token_id(const std::string& token) const;

 private:
  enum class Pattern { kGpt2, kLlama3 };
  // Byte ranges [begin, end) of `text` that the pre-tokenizer's pattern cuts it into.
  std::vector<std::pair<std::size_t, std::size_t>> split(std::string_view text) const;
  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const;

  Pattern pattern_ = Pattern::kGpt2;
  bool add_prefix_space_ = false;
  bool ignore_merges_ = false;
  std::vector<std::int32_t> prompt_prefix_;  // the template's special tokens before a sequence
  std::optional<std::int32_t> document_start_;
  std::unordered_map<std::string, std::int32_t> vocab_;
  // By id: a map, not a table one past the largest id (an id of 2^24 - 1 made 16 M strings, 512 MiB).
  std::unordered_map<std::int32_t, std::string> id_to_token_;
  std::int32_t vocab_size_ = 0;
  std::map<std::string, std::int32_t, std::greater<>> added_;  // content -> id, longest first at equal prefix
  std::unordered_map<std::string, int> merge_rank_;            // "left right" -> rank
  std::string path_;
};

// GPT-2's byte-level alphabet: byte b's printable stand-in, as UTF-8 (what a byte-level BPE's
// vocabulary spells its tokens in).
const std::array<std::string, 256>& byte_level_chars();

}  // namespace zt::data
