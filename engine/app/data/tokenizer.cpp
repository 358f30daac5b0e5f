// Byte-level BPE from a tokenizer.json (see the header): the pieces the pre-tokenizer splits
// (pre_tokenizer.h), GPT-2's byte-to-character map, and the merges applied lowest rank first.
#include "engine/app/data/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <optional>
#include <queue>
#include <utility>

#include "engine/app/data/pre_tokenizer.h"
#include "engine/app/data/utf8.h"
#include "engine/app/io/json_file.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"

namespace zt::data {

namespace {

// GPT-2's map of the 256 bytes to printable characters (the printable Latin-1 ones stand for
// themselves, the rest move to 256 + n), as UTF-8 strings, and its inverse.
struct ByteMap {
  std::array<std::string, 256> to_char;
  std::unordered_map<char32_t, unsigned char> to_byte;
  ByteMap() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(to_char[static_cast<std::size_t>(b)], c);
      to_byte[c] = static_cast<unsigned char>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

const std::array<std::string, 256>& byte_level_chars() { return byte_map().to_char; }

Tokenizer Tokenizer::load(const std::string& path) { return from_json(read_json_file(path), path); }

namespace {

// A token's id as the file gives it, refused where it is no integer (3.7 was read as 3, 2^40 as 0),
// negative or past any real vocabulary (the table of tokens by id is sized by the largest).
std::int32_t checked_id(const nlohmann::json& value, const std::string& token, const std::string& path) {
  constexpr std::int64_t kMaxVocabulary = std::int64_t{1} << 24;
  const std::optional<long long> id = json_integer_in(value, 0, kMaxVocabulary - 1);
  if (!id) {
    throw_input_error("{}: token '{}' has id {} (ids are integers from 0 to below {})", path, token, value.dump(),
                      kMaxVocabulary);
  }
  return static_cast<std::int32_t>(*id);
}

// The ids of the special tokens a TemplateProcessing puts before the sequence in its "single"
// template, in a post_processor that is one or holds one in a Sequence; none otherwise.
std::vector<std::int32_t> template_prefix(const nlohmann::json& post, const std::string& path) {
  if (!post.is_object()) return {};
  if (post.value("type", "") == "Sequence") {
    for (const nlohmann::json& p : post.value("processors", nlohmann::json::array())) {
      if (std::vector<std::int32_t> ids = template_prefix(p, path); !ids.empty()) return ids;
    }
    return {};
  }
  if (post.value("type", "") != "TemplateProcessing") return {};
  std::vector<std::int32_t> ids;
  for (const nlohmann::json& piece : post.at("single")) {
    if (piece.contains("Sequence")) break;
    const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
    for (const nlohmann::json& id : post.at("special_tokens").at(name).at("ids")) {
      ids.push_back(checked_id(id, name, path));
    }
  }
  return ids;
}

}  // namespace

Tokenizer Tokenizer::from_json(const nlohmann::json& j, const std::string& path) {
  Tokenizer t;
  t.path_ = path;
  try {
    const nlohmann::json& model = j.at("model");
    if (model.value("type", "") != "BPE") {
      throw_input_error("{}: model type {} (byte-level BPE tokenizers are read)", path, model.value("type", "?"));
    }
    if (model.value("byte_fallback", false)) throw_input_error("{}: byte_fallback BPE is not read", path);
    if (!j.value("normalizer", nlohmann::json()).is_null()) {
      throw_input_error("{}: a normalizer ({}) is not read", path, j["normalizer"].value("type", "?"));
    }
    // The pre-tokenizer: ByteLevel with GPT-2's pattern, or Llama 3's Split then a ByteLevel map.
    const nlohmann::json& pre = j.at("pre_tokenizer");
    const std::string pre_type = pre.value("type", "");
    if (pre_type == "ByteLevel" && pre.value("use_regex", true)) {
      t.pattern_ = Pattern::kGpt2;
      t.add_prefix_space_ = pre.value("add_prefix_space", false);
    } else if (pre_type == "Sequence" && pre.at("pretokenizers").size() == 2 &&
               pre["pretokenizers"][0].value("type", "") == "Split" &&
               pre["pretokenizers"][0].at("pattern").value("Regex", "") == kLlama3SplitRegex &&
               pre["pretokenizers"][1].value("type", "") == "ByteLevel" &&
               !pre["pretokenizers"][1].value("use_regex", true)) {
      t.pattern_ = Pattern::kLlama3;
      t.add_prefix_space_ = pre["pretokenizers"][1].value("add_prefix_space", false);
    } else {
      throw_input_error("{}: pre-tokenizer {} is not GPT-2's or Llama 3's byte-level one", path,
                        pre.dump().substr(0, 120));
    }
    t.ignore_merges_ = model.value("ignore_merges", false);
    for (const auto& [token, id] : model.at("vocab").items()) {
      const auto i = checked_id(id, token, path);
      t.vocab_[token] = i;
      t.id_to_token_[i] = token;
      t.vocab_size_ = std::max(t.vocab_size_, i + 1);
    }
    for (const nlohmann::json& a : j.value("added_tokens", nlohmann::json::array())) {
      const std::string content = a.at("content").get<std::string>();
      const auto i = checked_id(a.at("id"), content, path);
      // An empty one matched at every position of a prompt and never advanced: the encoding grew
      // without end (a sample hung, a run's first sample ran out of memory). The tokenizers library
      // leaves such a token out, and so does this reader.
      if (content.empty()) continue;
      t.id_to_token_[i] = content;
      t.vocab_size_ = std::max(t.vocab_size_, i + 1);
      t.added_[content] = i;
    }
    t.prompt_prefix_ = template_prefix(j.value("post_processor", nlohmann::json()), path);
    int rank = 0;
    for (const nlohmann::json& m : model.at("merges")) {  // "a b", or ["a", "b"] (tokenizers >= 0.20)
      t.merge_rank_.emplace(
          m.is_string() ? m.get<std::string>() : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>(), rank++);
    }
  } catch (const nlohmann::json::exception& e) {
    throw_input_error("{}: not a tokenizer.json of the BPE kind ({})", path, e.what());
  }
  return t;
}

std::optional<std::int32_t> Tokenizer::token_id(const std::string& token) const {
  if (const auto a = added_.find(token); a != added_.end()) return a->second;
  if (const auto v = vocab_.find(token); v != vocab_.end()) return v->second;
  return std::nullopt;
}

std::vector<std::pair<std::size_t, std::size_t>> Tokenizer::split(std::string_view text) const {
  const CodePoints c = decode_utf8(text);
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  for (std::size_t i = 0; i < c.cp.size();) {
    const std::size_t j = next_piece_end(c.cp, i, pattern_ == Pattern::kLlama3);
    pieces.emplace_back(c.at[i], c.at[j]);
    i = j;
  }
  return pieces;
}

// [Note: merging by a heap]
// The symbols form a list; each adjacent pair that a merge names waits in a min-heap keyed by
// (rank, position), so the lowest rank merges first and, at one rank, the leftmost, as the
// library's BPE does. A merge joins the right symbol into the left and offers the new pairs on
// either side; an entry whose pair has changed since it was offered (a side merged away or into
// something else) is stale and skipped when it comes up. O(n log n) lookups for a piece of n
// bytes: rescanning every pair after each merge made a 100k-character unspaced piece take seconds.
void Tokenizer::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const {
  struct Symbol {
    std::string text;  // byte-level characters, merged as the merges say
    int prev, next;    // neighbours in the list, -1 at its ends
    bool alive = true;
  };
  const int n = static_cast<int>(piece.size());
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (int i = 0; i < n; ++i) {
    symbols.push_back({byte_map().to_char[static_cast<unsigned char>(piece[static_cast<std::size_t>(i)])], i - 1,
                       i + 1 < n ? i + 1 : -1});
  }
  if (ignore_merges_) {
    std::string whole;
    for (const Symbol& s : symbols) whole += s.text;
    if (const auto it = vocab_.find(whole); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const auto rank_of = [&](int left) {
    const int right = symbols[static_cast<std::size_t>(left)].next;
    if (right < 0) return -1;
    const auto it = merge_rank_.find(symbols[static_cast<std::size_t>(left)].text + " " +
                                     symbols[static_cast<std::size_t>(right)].text);
    return it == merge_rank_.end() ? -1 : it->second;
  };
  using Candidate = std::pair<int, int>;  // (rank, left symbol's position)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto offer = [&](int left) {
    if (const int rank = rank_of(left); rank >= 0) heap.emplace(rank, left);
  };
  for (int i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const auto [rank, left] = heap.top();
    heap.pop();
    Symbol& l = symbols[static_cast<std::size_t>(left)];
    if (!l.alive || rank_of(left) != rank) continue;  // stale
    Symbol& r = symbols[static_cast<std::size_t>(l.next)];
    l.text += r.text;
    r.alive = false;
    l.next = r.next;
    if (l.next >= 0) symbols[static_cast<std::size_t>(l.next)].prev = left;
    if (l.prev >= 0) offer(l.prev);
    offer(left);
  }
  for (const Symbol& s : symbols) {
    if (!s.alive) continue;
    const auto it = vocab_.find(s.text);
    if (it == vocab_.end()) throw_input_error("{}: no token for '{}' and no merge makes one", path_, s.text);
    out.push_back(it->second);
  }
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> out;
  std::size_t start = 0;
  auto encode_stretch = [&](std::string_view s) {
    if (s.empty()) return;
    // ByteLevel's add_prefix_space puts ' ' before each split it is given that does not start with one:
    // the stretch itself for GPT-2's kind (its ByteLevel splits it afterwards), each piece of the Split
    // for Llama 3's (its ByteLevel comes after the Split).
    std::string prefixed;
    auto with_prefix = [&](std::string_view p) -> std::string_view {
      if (!add_prefix_space_ || p.front() == ' ') return p;
      prefixed.assign(1, ' ');
      prefixed.append(p);
      return prefixed;
    };
    if (pattern_ == Pattern::kGpt2) {
      s = with_prefix(s);
      for (const auto& [a, b] : split(s)) encode_piece(s.substr(a, b - a), out);
      return;
    }
    for (const auto& [a, b] : split(s)) encode_piece(with_prefix(s.substr(a, b - a)), out);
  };
  // The added tokens are cut out first (the longest one where several start at a position).
  for (std::size_t i = 0; i < text.size();) {
    const std::pair<const std::string, std::int32_t>* found = nullptr;
    for (const auto& entry : added_) {
      if (text.substr(i).starts_with(entry.first) && (found == nullptr || entry.first.size() > found->first.size())) {
        found = &entry;
      }
    }
    if (found == nullptr) {
      ++i;
      continue;
    }
    encode_stretch(text.substr(start, i - start));
    out.push_back(found->second);
    i += found->first.size();
    start = i;
  }
  encode_stretch(text.substr(start));
  return out;
}

std::vector<std::int32_t> Tokenizer::encode_prompt(std::string_view text) const {
  std::vector<std::int32_t> ids = prompt_prefix_;
  const std::vector<std::int32_t> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  if (ids.empty() && document_start_) return {*document_start_};
  if (ids.empty()) {  // nothing to continue: a document's start, as llm.c samples from <|endoftext|>
    // The delimiter tools/prepare_tokens.py starts each document with: the first the tokenizer has.
    for (const char* delimiter : {"<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "</s>"}) {
      if (const std::optional<std::int32_t> id = token_id(delimiter)) return {*id};
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (const std::int32_t id : ids) {
    const auto found = id_to_token_.find(id);
    if (found == id_to_token_.end()) continue;
    const std::string& token = found->second;
    // As the library's ByteLevel decoder: a token whose every character is in the byte map (every
    // token of the vocabulary, and added ones like "<|endoftext|>") becomes those bytes; one with a
    // character outside it (an added token with a space) stays its own text.
    std::string bytes;
    bool mapped = true;
    for (const char32_t ch : decode_utf8(token).cp) {
      const auto it = byte_map().to_byte.find(ch);
      if (!(mapped = it != byte_map().to_byte.end())) break;
      bytes += static_cast<char>(it->second);
    }
    out += mapped ? bytes : token;
  }
  return out;
}

}  // namespace zt::data
