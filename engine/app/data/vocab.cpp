// Vocabularies: strict UTF-8 decoding (invalid input is refused with its byte offset), building a
// character vocabulary from text, encoding/decoding, and the JSON file format with atomic saving
// and a validating loader (errors name the file).
#include "engine/app/data/vocab.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "engine/app/checkpoint/durable_file.h"
#include "engine/app/data/utf8.h"
#include "engine/app/io/json_file.h"
#include "engine/app/io/output_file.h"
#include "engine/base/core/check.h"

namespace zt::data {

namespace {

constexpr int kMaxTokens = 65535;

// Decodes the code point starting at text[pos]; sets *len to its byte length. Throws InputError
// for invalid UTF-8: bad lead or continuation bytes, truncation, overlong forms, surrogates and
// values above U+10FFFF.
char32_t decode_one(std::string_view text, std::size_t pos, std::size_t* len) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  int n = 0;
  char32_t cp = 0, min_cp = 0;
  if ((b0 & 0xE0) == 0xC0)
    n = 2, cp = b0 & 0x1F, min_cp = 0x80;
  else if ((b0 & 0xF0) == 0xE0)
    n = 3, cp = b0 & 0x0F, min_cp = 0x800;
  else if ((b0 & 0xF8) == 0xF0)
    n = 4, cp = b0 & 0x07, min_cp = 0x10000;
  else
    throw_input_error("invalid UTF-8: byte 0x{:02X} at byte offset {} cannot start a character", b0, pos);
  if (pos + n > text.size()) throw_input_error("invalid UTF-8: truncated character at byte offset {}", pos);
  for (int i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(text[pos + i]);
    if ((b & 0xC0) != 0x80) {
      throw_input_error("invalid UTF-8: byte 0x{:02X} at byte offset {} is not a continuation byte", b, pos + i);
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    throw_input_error("invalid UTF-8: overlong, surrogate or out-of-range character at byte offset {}", pos);
  }
  *len = static_cast<std::size_t>(n);
  return cp;
}

std::string encode_one(char32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

// "U+00E9 'é'", or just "U+000A" for control characters, for error messages.
std::string describe_char(char32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return fmt::format("U+{:04X}", static_cast<std::uint32_t>(cp));
  return fmt::format("U+{:04X} '{}'", static_cast<std::uint32_t>(cp), encode_one(cp));
}

}  // namespace

Vocab Vocab::build_char(std::string_view utf8_text) {
  if (utf8_text.empty()) throw_input_error("cannot build a vocabulary from an empty text");
  std::set<char32_t> code_points;
  for (std::size_t pos = 0, len = 0; pos < utf8_text.size(); pos += len)
    code_points.insert(decode_one(utf8_text, pos, &len));
  if (code_points.size() > static_cast<std::size_t>(kMaxTokens)) {
    throw_input_error("the text has {} distinct characters; a vocabulary holds at most {}", code_points.size(),
                      kMaxTokens);
  }
  Vocab v;
  v.kind_ = Kind::kChar;
  for (char32_t cp : code_points) v.pieces_.push_back(encode_one(cp));
  return v;
}

Vocab Vocab::byte_level() {
  Vocab v;
  v.kind_ = Kind::kByte;
  for (int b = 0; b < 256; ++b) v.pieces_.emplace_back(1, static_cast<char>(b));
  return v;
}

bool Vocab::is_own_format(const nlohmann::json& j) {
  return j.is_object() && j.contains("format") && j["format"] == "zerotrain-vocab";
}

Vocab Vocab::load(const std::string& path) {
  const nlohmann::json j = read_json_file(path);  // a directory, unreadable or not JSON: one line naming it
  if (!is_own_format(j)) {
    throw_input_error("{}: not a zerotrain vocabulary (\"format\" must be \"zerotrain-vocab\")", path);
  }
  if (!j.contains("version") || j["version"] != 1) {
    throw_input_error("{}: unsupported vocabulary version {} (expected 1)", path,
                      j.contains("version") ? j["version"].dump() : "(missing)");
  }
  const std::string kind = j.contains("kind") && j["kind"].is_string() ? j["kind"].get<std::string>() : "";
  if (kind == "byte") {
    // The byte vocabulary is fixed; a "tokens" list, if present, must be exactly 0..255.
    if (j.contains("tokens")) {
      const auto& t = j["tokens"];
      bool ok = t.is_array() && t.size() == 256;
      for (std::size_t i = 0; ok && i < 256; ++i) ok = t[i].is_number_integer() && t[i] == i;
      if (!ok) throw_input_error("{}: a byte vocabulary's \"tokens\" must be the integers 0..255 in order", path);
    }
    return byte_level();
  }
  if (kind != "char") throw_input_error("{}: vocabulary \"kind\" must be \"char\" or \"byte\"", path);
  if (!j.contains("tokens") || !j["tokens"].is_array()) {
    throw_input_error("{}: vocabulary has no \"tokens\" list", path);
  }
  const auto& tokens = j["tokens"];
  std::vector<std::string> pieces;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (!tokens[i].is_string()) throw_input_error("{}: vocabulary token {} is not a string", path, i);
    pieces.push_back(tokens[i].get<std::string>());
  }
  return from_chars(std::move(pieces), path);
}

Vocab Vocab::from_chars(std::vector<std::string> tokens, const std::string& path) {
  if (tokens.empty()) throw_input_error("{}: vocabulary \"tokens\" is empty", path);
  if (tokens.size() > static_cast<std::size_t>(kMaxTokens)) {
    throw_input_error("{}: vocabulary has {} tokens; at most {} are allowed", path, tokens.size(), kMaxTokens);
  }
  Vocab v;
  v.kind_ = Kind::kChar;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    std::string& piece = tokens[i];
    std::size_t len = 0;
    bool single = false;
    try {
      single = !piece.empty() && (decode_one(piece, 0, &len), len == piece.size());
    } catch (const InputError&) {
      single = false;
    }
    if (!single) throw_input_error("{}: vocabulary token {} is not exactly one character", path, i);
    if (!seen.insert(piece).second) throw_input_error("{}: vocabulary token {} is a duplicate", path, i);
    v.pieces_.push_back(std::move(piece));
  }
  return v;
}

std::string Vocab::json_text() const {
  nlohmann::json j = {{"format", "zerotrain-vocab"}, {"version", 1}, {"kind", kind_ == Kind::kChar ? "char" : "byte"}};
  if (kind_ == Kind::kChar) {
    j["tokens"] = pieces_;
  } else {
    std::vector<int> ids(256);
    for (int i = 0; i < 256; ++i) ids[static_cast<std::size_t>(i)] = i;
    j["tokens"] = ids;
  }
  return j.dump(1) + "\n";
}

// Synced before its rename and its folder after (a power loss left a run's vocab.json empty beside
// a good checkpoint, which then exported nothing).
void Vocab::save(const std::string& path) const { ckpt::write_file_atomically(path, json_text()); }

std::vector<std::uint16_t> Vocab::encode(std::string_view utf8_text) const {
  std::vector<std::uint16_t> ids;
  ids.reserve(utf8_text.size());
  if (kind_ == Kind::kByte) {
    for (char c : utf8_text) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }
  std::unordered_map<char32_t, std::uint16_t> id_of;
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    std::size_t len = 0;
    id_of[decode_one(pieces_[i], 0, &len)] = static_cast<std::uint16_t>(i);
  }
  for (std::size_t pos = 0, len = 0; pos < utf8_text.size(); pos += len) {
    const char32_t cp = decode_one(utf8_text, pos, &len);
    const auto it = id_of.find(cp);
    if (it == id_of.end()) {
      throw_input_error("character {} at byte offset {} is not in the vocabulary ({} tokens)", describe_char(cp), pos,
                        pieces_.size());
    }
    ids.push_back(it->second);
  }
  return ids;
}

std::string Vocab::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (std::int32_t id : ids) {
    out += (id >= 0 && id < size()) ? pieces_[static_cast<std::size_t>(id)] : std::string(kReplacementChar);
  }
  return out;
}

}  // namespace zt::data
