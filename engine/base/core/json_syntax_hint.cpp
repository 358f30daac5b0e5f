// JSON syntax hints (see the header).
#include "engine/base/core/json_syntax_hint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace zt {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Where the token the parser stopped in begins: back from `at` to the first delimiter. A string
// token ends at `at` on its closing quote; its opening quote is the start.
std::size_t token_start(std::string_view text, std::size_t at) {
  if (text[at] == '"' && at > 0) {
    const std::size_t open = text.rfind('"', at - 1);
    return open == std::string_view::npos ? at : open;
  }
  std::size_t start = at;
  while (start > 0 && !is_space(text[start - 1]) &&
         std::string_view(":,[{").find(text[start - 1]) == std::string_view::npos) {
    --start;
  }
  return start;
}

// The hint for a bare word where a value belongs (gpt2; NaN, -inf; True, NULL, None), `word` as
// the caller cut it at the first character no word holds. A literal in another case, or a number
// JSON lacks, is not told to become a string, which a number or bool key would then refuse.
std::string bare_word_hint(std::string_view word) {
  std::string lower;
  for (const char ch : word.starts_with('-') || word.starts_with('+') ? word.substr(1) : word) {
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  }
  if (lower == "nan" || lower == "inf" || lower == "infinity") {
    return " (JSON has no NaN or Infinity: write a finite number)";
  }
  if (lower == "true" || lower == "false" || lower == "null" || lower == "none") {
    return fmt::format(" (JSON writes {} in lower case{})", lower == "none" ? "null" : lower,
                       lower == "none" ? ", null for None" : "");
  }
  // A long run of text is not quoted back whole.
  const std::string shown(word.substr(0, std::min<std::size_t>(word.size(), 40)));
  return fmt::format(" (a word without quotes: JSON strings take double quotes, \"{}\")", shown);
}

}  // namespace

std::string json_syntax_hint(std::string_view text, std::size_t byte, std::string_view parser_message) {
  const auto says = [&](std::string_view words) { return parser_message.find(words) != std::string_view::npos; };
  if (says("unexpected end of input")) return " (the text ends before every { and [ is closed)";
  // A line break inside a string: its closing quote left out. Another control character (a tab)
  // is only to be escaped.
  if (says("missing closing quote") || says("control character U+000A") || says("control character U+000D")) {
    return " (a string not closed on its line: a missing \")";
  }
  if (says("must be escaped")) return " (a control character inside a string: write a tab as \\t)";
  if (byte == 0 || byte > text.size()) return "";
  const std::size_t at = byte - 1;  // nlohmann's byte is one past where it stopped
  const char c = text[at];
  // A '/' there begins a comment, which JSON lacks; a '}' or ']' right after a comma is a trailing
  // comma (JavaScript and Python take both).
  if (c == '/' && at + 1 < text.size() && (text[at + 1] == '/' || text[at + 1] == '*')) {
    return " (JSON has no comments: remove the // or /* */ text)";
  }
  if (c == '}' || c == ']') {
    const std::size_t before = at == 0 ? std::string_view::npos : text.find_last_not_of(" \t\r\n", at - 1);
    if (before != std::string_view::npos && text[before] == ',') {
      return " (JSON allows no comma after a last item: remove the one before it)";
    }
  }
  if (says("; expected end of input")) {
    return c == '}' || c == ']' ? " (one } or ] too many?)" : " (text after the JSON value's end)";
  }
  // nlohmann says "unexpected X; expected Y": Y is what it wanted ("unexpected ':'" holds the
  // words "expected ':'" too).
  if (says("; expected ':'")) return " (a key needs a ':' before its value)";
  const std::size_t start = token_start(text, at);
  const char first = text[start];
  if (says("invalid literal") || says("invalid number")) {
    if (first == '\'') return " (JSON strings take double quotes: \"...\", not '...')";
    if (first == '.') return " (a number needs a digit before its point: 0.5, not .5)";
    if (first == '+') return " (JSON numbers take no '+' sign)";
    if (first == '0' && start + 1 < text.size() && (text[start + 1] == 'x' || text[start + 1] == 'X')) {
      return " (JSON numbers are decimal: no 0x)";
    }
    if (std::isalpha(static_cast<unsigned char>(first)) != 0 || first == '_' ||
        (first == '-' && start + 1 < text.size() && std::isalpha(static_cast<unsigned char>(text[start + 1])))) {
      std::size_t end = start + 1;
      while (end < text.size() && is_word_char(text[end])) ++end;
      return bare_word_hint(text.substr(start, end - start));
    }
    if (says("expected digit after")) return " (a number ends without its digits: 1.0, 1e-3, -1)";
    return "";
  }
  // A value right after another: digits after a lone 0 (01, the 0 a number of its own) are a
  // leading zero; any other, a comma left out.
  if (says("unexpected number literal") || says("unexpected string literal") || says("unexpected '{'") ||
      says("unexpected '['") || says("unexpected true") || says("unexpected false") || says("unexpected null")) {
    const std::size_t digits = first == '-' ? start + 1 : start;
    if (says("unexpected number literal") && digits + 1 <= at && text[digits] == '0' &&
        std::isdigit(static_cast<unsigned char>(text[digits + 1])) != 0) {
      return " (JSON numbers have no leading zero: 1, not 01)";
    }
    if (says("; expected '}'") || says("; expected ']'")) return " (a comma missing before this item)";
  }
  return "";
}

std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t byte) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

std::string where_json_stopped(std::string_view text, std::size_t byte, std::string_view parser_message) {
  const auto [line, col] = line_and_column(text, byte);
  return fmt::format("line {}, column {}{}", line, col, json_syntax_hint(text, byte, parser_message));
}

}  // namespace zt
