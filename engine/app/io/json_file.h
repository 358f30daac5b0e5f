// A JSON file read whole (a tokenizer.json, a Hugging Face config.json or index): InputError
// naming the file when it cannot be opened or is not JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace zt {

nlohmann::json read_json_file(const std::string& path);

}  // namespace zt
