// The config's text (see the header).
#include "engine/base/core/config_text.h"

#include <fmt/format.h>

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string_view>
#include <utility>

#include "engine/base/core/check.h"
#include "engine/base/core/json_syntax_hint.h"

namespace zt {

namespace {
// No config is nested more than a few levels; nlohmann::json copies and prints a value by recursing
// once a level, so a value nested 100000 deep would overflow the stack.
constexpr int kMaxConfigDepth = 64;

// Which end of a double's range a number falls past. Below: the parser reads it as 0 or a
// subnormal without a word ("lr": 1e-400 trained at an LR of 0). Above: the parser refuses it, but
// names neither its line nor its column, and a search of its text could land in a string.
enum class PastRange { kBelowNormal, kAboveMax };

// The first JSON number in `text` (outside strings) past `which` end of a double's range, and its
// 1-based byte offset; {"", 0} where none is.
std::pair<std::string, std::size_t> first_number_out_of_range(std::string_view text, PastRange which) {
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    const std::size_t end = text.find_first_not_of("0123456789+-.eE", i);
    const std::string number(text.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i));
    errno = 0;
    const double value = std::strtod(number.c_str(), nullptr);
    const bool nonzero_digits = number.find_first_of("123456789") < number.find_first_of("eE");
    const bool below = nonzero_digits && errno == ERANGE && std::fabs(value) < DBL_MIN;
    const bool above = errno == ERANGE && std::isinf(value);
    if (which == PastRange::kBelowNormal ? below : above) return {number, i + 1};
    i += number.size() - 1;
  }
  return {"", 0};
}

}  // namespace

std::string json_word_hint(const std::string& text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const char c = text[first];
  const bool meant_as_json = c == '{' || c == '[' || c == '-' || c == '.' || (c >= '0' && c <= '9');
  if (!meant_as_json) return "";
  try {
    const nlohmann::json parsed = nlohmann::json::parse(text);
    (void)parsed;
  } catch (const nlohmann::json::parse_error& e) {
    return fmt::format(" (read as a word: as JSON it is malformed at {})", where_json_stopped(text, e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {
    return fmt::format(" (read as a word: as JSON, {})", json_error_words(e));
  }
  return "";
}

std::string json_error_words(const nlohmann::json::exception& e) {
  const std::string what = e.what();  // "[json.exception.out_of_range.406] number overflow parsing '1e999'"
  const std::size_t words = what.find("] ");
  return words == std::string::npos ? what : what.substr(words + 2);
}

std::string preview_json(const nlohmann::json& value, int depth) {
  constexpr std::size_t kMaxChars = 80;
  std::string out;
  if (value.is_array() || value.is_object()) {
    // Not dump(): it recurses once a level, and a value nested 100000 deep overflows the stack.
    const bool array = value.is_array();
    out.push_back(array ? '[' : '{');  // (assigning the literal trips GCC 12's -Wrestrict at -O3)
    if (depth >= 2 && !value.empty()) {
      out += "...";
    } else {
      int shown = 0;
      for (auto it = value.begin(); it != value.end() && out.size() < kMaxChars; ++it, ++shown) {
        if (shown > 0) out += ", ";
        if (!array)
          out += nlohmann::json(it.key()).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) + ": ";
        out += preview_json(*it, depth + 1);
      }
      if (shown < static_cast<int>(value.size())) out += ", ...";
    }
    out += array ? "]" : "}";
  } else {  // ASCII, with invalid UTF-8 replaced: a message must print whatever the value held
    out = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  }
  if (out.size() > kMaxChars) {
    const std::size_t size = value.is_string() ? value.get_ref<const std::string&>().size() : value.size();
    out = fmt::format("{}... ({} {})", out.substr(0, kMaxChars), size,
                      value.is_string()  ? "bytes"
                      : value.is_array() ? "elements"
                                         : "keys");
  }
  return out;
}

nlohmann::json section_value(const nlohmann::json& doc, const char* section, const char* key) {
  return doc.contains(section) && doc[section].contains(key) ? doc[section][key] : nlohmann::json();
}

std::vector<std::string> apply_override(nlohmann::json& doc, const std::string& assignment) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw_input_error("--set '{}': expected section.key=value", assignment);
  }
  const std::string dotted_key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  try {  // JSON strings are UTF-8; an invalid byte would fail later, far from the --set that held it
    (void)nlohmann::json(assignment).dump();
  } catch (const nlohmann::json::type_error&) {
    throw_input_error("--set {}: not valid UTF-8", preview_json(nlohmann::json(assignment)));
  }
  nlohmann::json value;
  bool parsed = true;  // else a bare word, kept as text
  try {
    value = nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > kMaxConfigDepth) {
        throw_input_error("--set '{}': the value is nested deeper than {} levels", dotted_key, kMaxConfigDepth);
      }
      return true;
    });
  } catch (const nlohmann::json::exception&) {
    // Bare words such as bf16 or none, and paths or globs ("[ab]*.bin"); a broken object or number
    // meant as JSON is said by the key's type error (json_word_hint).
    value = text;
    parsed = false;
  }
  if (parsed) {  // a number, or numbers inside an object or list (--set 'optim={"lr": 1e-400}')
    if (const auto [number, byte] = first_number_out_of_range(text, PastRange::kBelowNormal); byte != 0) {
      throw_input_error(
          "--set {}: number underflow parsing '{}' (below the smallest normal double, {:g}; write 0 "
          "where zero is meant)",
          assignment, number, DBL_MIN);
    }
  }
  nlohmann::json* node = &doc;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = dotted_key.find('.', start);
    const std::string part = dotted_key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw_input_error("--set '{}': empty key component", assignment);
    if (!node->is_object()) {  // the key before this part holds a value, not keys
      throw_input_error("--set '{}': '{}' is not a section", assignment, dotted_key.substr(0, start - 1));
    }
    if (dot == std::string::npos) {
      nlohmann::json& target = (*node)[part];
      // A section (a top-level key) given whole: its keys set, its others kept. A section that
      // replaced the file's silently dropped every key it left out (and earlier --sets inside it).
      if (start == 0 && value.is_object() && target.is_object()) {
        std::vector<std::string> keys;
        for (const auto& [key, v] : value.items()) {
          target[key] = v;
          keys.push_back(dotted_key + "." + key);
        }
        return keys;
      }
      target = value;
      return {dotted_key};
    }
    // A section given as null is one not given (ConfigReader::find): a key set inside it makes it.
    if (!node->contains(part) || (*node)[part].is_null()) (*node)[part] = nlohmann::json::object();
    node = &(*node)[part];
    start = dot + 1;
  }
}

nlohmann::json::parser_callback_t json_depth_limit(const std::string& source) {
  return [source](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxConfigDepth) throw_input_error("{}: JSON nested deeper than {} levels", source, kMaxConfigDepth);
    return true;
  };
}

nlohmann::json parse_config_json(const std::string& text, const std::string& source) {
  // Each object or array being parsed, innermost last: the key it is the value of (none for the
  // top level and an array's elements) and an object's keys met so far; a duplicate is named by its
  // dotted path ("zero.stage"; "train.x.b" for a key of an object in the array train.x).
  struct OpenValue {
    std::string name;
    bool array = false;
    std::set<std::string> keys;
  };
  std::vector<OpenValue> open;
  std::string duplicate, last_key;
  using Event = nlohmann::json::parse_event_t;
  const nlohmann::json::parser_callback_t check = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth > kMaxConfigDepth) {  // copying or printing such a value recurses once a level: the stack
      throw_input_error("config error in {}: nested deeper than {} levels", source, kMaxConfigDepth);
    }
    if (event == Event::object_start || event == Event::array_start) {
      const bool named = !open.empty() && !open.back().array;  // the value of the key just read
      open.push_back({named ? last_key : "", event == Event::array_start, {}});
    }
    if ((event == Event::object_end || event == Event::array_end) && !open.empty()) open.pop_back();
    if (event == Event::key && !open.empty()) {
      last_key = parsed.get<std::string>();
      if (duplicate.empty() && !open.back().keys.insert(last_key).second) {
        for (const OpenValue& v : open) {
          if (!v.name.empty()) duplicate += v.name + ".";
        }
        duplicate += last_key;
      }
    }
    return true;
  };
  // The parser takes a NUL byte for the end of the text and would ignore what follows it.
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
    const auto [line, col] = line_and_column(text, nul + 1);
    throw_input_error("config error in {}: a NUL byte at line {}, column {} (not a JSON text file?)", source, line,
                      col);
  }
  // A byte-order mark alone is empty too (the parser skips one; it then found no value).
  const std::size_t bom = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  if (text.find_first_not_of(" \t\r\n", bom) == std::string::npos) {
    throw_input_error("config error in {}: the file is empty (a config is a JSON object, e.g. {{\"model\": {{...}}}})",
                      source);
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::parse_error& e) {
    throw_input_error("config error in {}: malformed JSON at {}", source, where_json_stopped(text, e.byte, e.what()));
  } catch (const nlohmann::json::out_of_range& e) {  // e.g. 1e999, a number no double holds
    // The parser names the number but not where it is: the scanner finds it, outside strings.
    const auto [number, byte] = first_number_out_of_range(text, PastRange::kAboveMax);
    if (byte == 0) throw_input_error("config error in {}: {}", source, json_error_words(e));
    const auto [line, col] = line_and_column(text, byte);
    throw_input_error("config error in {}: number overflow parsing '{}' at line {}, column {}", source, number, line,
                      col);
  }
  if (const auto [number, byte] = first_number_out_of_range(text, PastRange::kBelowNormal); byte != 0) {
    const auto [line, col] = line_and_column(text, byte);
    throw_input_error(
        "config error in {}: number underflow parsing '{}' at line {}, column {} (below the smallest "
        "normal double, {:g}; write 0 where zero is meant)",
        source, number, line, col, DBL_MIN);
  }
  if (!duplicate.empty()) {
    throw_input_error("config error in {}: key '{}' appears twice in one object (which one was meant?)", source,
                      duplicate);
  }
  return doc;
}

}  // namespace zt
