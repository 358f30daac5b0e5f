// The byte-level BPE pre-tokenizers: the regular expressions GPT-2's and Llama 3's tokenizer.json
// split text with, written out as scanners over code points (letters and numbers from
// unicode_classes.inc, Unicode's White_Space), so that no regex library with \p{L} is needed and
// a 100k-character piece splits in linear time.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace zt::data {

// Llama 3's Split pattern as its tokenizer.json writes it (GPT-2's is ByteLevel's built-in one).
inline constexpr std::string_view kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The text's code points and each one's byte offset (one past the end last). Bytes that are not
// UTF-8 stand for themselves as code points 0xDC80.. (never a letter, number or space).
struct CodePoints {
  std::vector<char32_t> cp;
  std::vector<std::size_t> at;
};
CodePoints decode_utf8(std::string_view s);

// Where the piece starting at code point i ends (one past), by Llama 3's pattern or GPT-2's.
std::size_t next_piece_end(const std::vector<char32_t>& c, std::size_t i, bool llama3);

}  // namespace zt::data
