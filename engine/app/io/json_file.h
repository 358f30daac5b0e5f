// A JSON file read whole (a tokenizer.json, a Hugging Face config.json or index): InputError
// naming the file when it cannot be opened or is not JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace zt {

// `what` names the file in the errors of reading it ("JSON file", "--profile").
nlohmann::json read_json_file(const std::string& path, std::string_view what = "JSON file");

}  // namespace zt
