// The pre-tokenizers (see the header).
#include "engine/app/data/pre_tokenizer.h"

#include <algorithm>
#include <iterator>

namespace zt::data {

namespace {

struct CodeRange {
  char32_t lo, hi;
};
#include "engine/app/data/unicode_classes.inc"

template <std::size_t N>
bool in_ranges(const CodeRange (&ranges)[N], char32_t c) {
  const auto it = std::upper_bound(std::begin(ranges), std::end(ranges), c,
                                   [](char32_t v, const CodeRange& r) { return v < r.lo; });
  return it != std::begin(ranges) && c <= (it - 1)->hi;
}

bool is_letter(char32_t c) { return in_ranges(kLetterRanges, c); }
bool is_number(char32_t c) { return in_ranges(kNumberRanges, c); }
// Unicode's White_Space, as the patterns' \s matches it.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool is_other(char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }

// The length of a contraction ('s 't 're 've 'm 'll 'd) at i, 0 for none; case-insensitive for Llama 3.
std::size_t contraction(const std::vector<char32_t>& c, std::size_t i, bool any_case) {
  if (c[i] != U'\'') return 0;
  auto at = [&](std::size_t k) -> char32_t {
    if (i + k >= c.size()) return 0;
    const char32_t x = c[i + k];
    if (!any_case) return x;
    // (?i) matches by Unicode case folding: besides A-Z, the long s (U+017F) folds to 's', the one
    // code point beyond ASCII that folds to a letter of s t r e v m l d ("'ſuch" starts with "'ſ").
    if (x == 0x17F) return U's';
    return x >= U'A' && x <= U'Z' ? x + 32 : x;
  };
  if (at(1) == U's' || at(1) == U't' || at(1) == U'm' || at(1) == U'd') return 2;
  if ((at(1) == U'r' && at(2) == U'e') || (at(1) == U'v' && at(2) == U'e') || (at(1) == U'l' && at(2) == U'l'))
    return 3;
  return 0;
}

// \s+(?!\S) then \s+ at i (c[i] a space): the run, less its last space when a non-space follows
// and the run has more than one.
std::size_t space_run(const std::vector<char32_t>& c, std::size_t i) {
  std::size_t j = i;
  while (j < c.size() && is_space(c[j])) ++j;
  return j < c.size() && j - i > 1 ? j - 1 : j;
}

template <class Pred>
std::size_t run_of(const std::vector<char32_t>& c, std::size_t j, Pred pred) {
  while (j < c.size() && pred(c[j])) ++j;
  return j;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::size_t gpt2_next(const std::vector<char32_t>& c, std::size_t i) {
  if (const std::size_t k = contraction(c, i, false)) return i + k;
  const std::size_t s = c[i] == U' ' && i + 1 < c.size() ? i + 1 : i;  // the optional leading space
  if (is_letter(c[s])) return run_of(c, s, is_letter);
  if (is_number(c[s])) return run_of(c, s, is_number);
  if (is_other(c[s])) return run_of(c, s, is_other);
  return space_run(c, i);
}

// Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//          \s*[\r\n]+|\s+(?!\S)|\s+
std::size_t llama3_next(const std::vector<char32_t>& c, std::size_t i) {
  auto newline = [](char32_t x) { return x == U'\r' || x == U'\n'; };
  if (const std::size_t k = contraction(c, i, true)) return i + k;
  if (is_letter(c[i])) return run_of(c, i, is_letter);
  if (!newline(c[i]) && !is_number(c[i]) && i + 1 < c.size() && is_letter(c[i + 1])) return run_of(c, i + 1, is_letter);
  if (is_number(c[i])) return std::min(run_of(c, i, is_number), i + 3);
  const std::size_t s = c[i] == U' ' && i + 1 < c.size() ? i + 1 : i;
  if (is_other(c[s])) return run_of(c, run_of(c, s, is_other), newline);
  // \s*[\r\n]+: the longest run of spaces that ends in a newline.
  std::size_t j = i, last_newline_end = 0;
  while (j < c.size() && is_space(c[j])) {
    ++j;
    if (newline(c[j - 1])) last_newline_end = j;
  }
  if (last_newline_end > 0) return last_newline_end;
  return space_run(c, i);
}

}  // namespace

CodePoints decode_utf8(std::string_view s) {
  CodePoints r;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < len; ++k) {
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) {
        len = 0;
        break;
      }
      c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    if (len == 0) {
      c = 0xDC00 + b;
      len = 1;
    }
    r.cp.push_back(c);
    r.at.push_back(i);
    i += static_cast<std::size_t>(len);
  }
  r.at.push_back(s.size());
  return r;
}

std::size_t next_piece_end(const std::vector<char32_t>& c, std::size_t i, bool llama3) {
  return llama3 ? llama3_next(c, i) : gpt2_next(c, i);
}

}  // namespace zt::data
