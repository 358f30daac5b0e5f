// What a user most likely got wrong where a JSON parser stopped: the habits of JavaScript, Python
// and YAML that JSON lacks (comments, a trailing comma, single quotes, bare words, NaN, .5, +1),
// said in words beside the line and column, which alone leave the reader to guess.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace zt {

// A parenthesised hint, with a leading space (" (JSON strings take double quotes ...)"), or "" where
// nothing likely is known. `byte` is nlohmann::json::parse_error::byte (one past where the parser
// stopped), `parser_message` its what(), whose wording tells the kind of token it expected.
std::string json_syntax_hint(std::string_view text, std::size_t byte, std::string_view parser_message);

// Line and column, both from 1, of a 1-based byte offset into `text`.
std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t byte);

// "line L, column C" and the hint: where a parse of `text` stopped, for a message.
std::string where_json_stopped(std::string_view text, std::size_t byte, std::string_view parser_message);

}  // namespace zt
