// Character- and byte-level vocabularies: built from text, saved/loaded as JSON, encoding text to
// token ids and decoding ids back to UTF-8 (for prepared datasets and for printing samples).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zt::data {

class Vocab {
 public:
  enum class Kind { kChar, kByte };

  // Char level: the sorted set of Unicode code points in `utf8_text` (at most 65535). Throws
  // InputError for invalid UTF-8 or an empty text.
  static Vocab build_char(std::string_view utf8_text);
  // Byte level: 256 tokens, token i is byte i.
  static Vocab byte_level();
  // JSON: {"format": "zerotrain-vocab", "version": 1, "kind": "char"|"byte", "tokens": [...]} with
  // each token's UTF-8 text (char level) or its byte value 0..255 (byte level).
  static Vocab load(const std::string& path);
  // Whether `j` is this format's JSON (its "format" names it): a Hugging Face vocab.json, GPT-2's
  // token map, is not.
  static bool is_own_format(const nlohmann::json& j);
  // Char level from its tokens in id order, each exactly one character and none twice (InputError
  // naming `where` otherwise).
  static Vocab from_chars(std::vector<std::string> tokens, const std::string& where);
  // The JSON above as text; save writes it through a staging file, synced, renamed into place.
  std::string json_text() const;
  void save(const std::string& path) const;

  Kind kind() const { return kind_; }
  // Each token's UTF-8 text (one byte each at byte level), in id order.
  const std::vector<std::string>& pieces() const { return pieces_; }
  int size() const { return static_cast<int>(pieces_.size()); }
  // Throws InputError naming the first character not in the vocabulary.
  std::vector<std::uint16_t> encode(std::string_view utf8_text) const;
  // Ids outside [0, size) decode to U+FFFD. Byte-level output may be invalid UTF-8 mid-sequence.
  std::string decode(std::span<const std::int32_t> ids) const;

 private:
  Kind kind_ = Kind::kChar;
  std::vector<std::string> pieces_;  // UTF-8 text of each token (one byte each for kByte)
};

}  // namespace zt::data
