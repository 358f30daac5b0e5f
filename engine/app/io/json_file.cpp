// read_json_file (see the header).
#include "engine/app/io/json_file.h"

#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/config_text.h"
#include "engine/base/core/json_syntax_hint.h"

namespace zt {

nlohmann::json read_json_file(const std::string& path, std::string_view what) {
  const std::string text = read_whole_input(path, what);
  // Said so, as a config is (the parser's end of input read as an object left open).
  if (text.find_first_not_of(" \t\r\n", text.starts_with("\xEF\xBB\xBF") ? 3 : 0) == std::string::npos) {
    throw_input_error("{} {}: the file is empty (not JSON)", what, path);
  }
  try {
    return nlohmann::json::parse(text, json_depth_limit(path));
  } catch (const nlohmann::json::parse_error& e) {  // where, and what was likely meant
    throw_input_error("{} {}: not valid JSON at {}", what, path, where_json_stopped(text, e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {  // e.g. 1e999, a number no double holds
    throw_input_error("{} {}: not valid JSON ({})", what, path, json_error_words(e));
  }
}

}  // namespace zt
