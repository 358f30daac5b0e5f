// A config's text: JSON parsed with its positions and the checks nlohmann::json leaves out (a key
// given twice, a NUL byte, a depth no config has), --set assignments applied to it, and values shown
// in messages. ConfigReader (config_reader.h) then reads the parsed sections.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace zt {

// A value as an error message shows it: ASCII on one line of at most about 100 characters (long
// strings and large arrays or objects cut, with their size; levels below the second as "..."), and
// without recursing into the whole value, however deeply nested.
std::string preview_json(const nlohmann::json& value, int depth = 0);

// A --set value kept as a word because it is no JSON, though it opens as JSON would (an object, a
// list, a number: `optim={"lr": 0.1,}`, `optim.lr=1e999`): " (read as a word: as JSON it is
// malformed at line 1, column 12 (...))", for the type error of a key that wanted no string; ""
// where it parses, or opens as a word would (bf16, a path).
std::string json_word_hint(const std::string& text);

// An nlohmann exception's words, without its "[json.exception.X.N] " prefix.
std::string json_error_words(const nlohmann::json::exception& e);

// Applies "--set section.key=value" to a config document and returns the dotted keys it set. The
// value is parsed as JSON when it parses (numbers, true/false, quoted strings), else taken as a
// plain string. A whole section given as an object ("--set 'optim={\"lr\": 0.01}'") sets the keys
// it names, each returned, and keeps the section's others (the file's, earlier --sets'); any other
// key's value replaces what was there (an object-valued key such as model.rope_scaling whole).
std::vector<std::string> apply_override(nlohmann::json& doc, const std::string& assignment);

// doc[section][key] where both are there, else null: a saved config's value (a checkpoint's, a run
// directory's config.json), which may predate the key.
nlohmann::json section_value(const nlohmann::json& doc, const char* section, const char* key);

// A parser callback for any JSON a user's file holds (a config, a safetensors header, a Hugging
// Face config.json): InputError naming `source` for a value nested deeper than a config ever is.
// nlohmann::json copies, prints and compares values by recursing once a level, so a value nested
// 100000 deep would overflow the stack later, far from the file.
nlohmann::json::parser_callback_t json_depth_limit(const std::string& source);

// Parses config text, refusing what nlohmann::json would let through silently: a key given twice in
// one object (the last would win), and text after a NUL byte (ignored). Errors name `source` and
// the line and column.
nlohmann::json parse_config_json(const std::string& text, const std::string& source);

}  // namespace zt
