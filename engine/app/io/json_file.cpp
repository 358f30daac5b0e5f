// read_json_file (see the header).
#include "engine/app/io/json_file.h"

#include "engine/app/io/input_file.h"
#include "engine/base/core/check.h"
#include "engine/base/core/config_reader.h"
#include "engine/base/core/config_text.h"

namespace zt {

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_whole_input(path, "JSON file");
  try {
    return nlohmann::json::parse(text, json_depth_limit(path));
  } catch (const nlohmann::json::exception& e) {
    throw_input_error("{}: not valid JSON ({})", path, e.what());
  }
}

}  // namespace zt
