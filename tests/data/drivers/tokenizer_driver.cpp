// tests/data/tokenizer_test.py's driver: data::Tokenizer over JSON lines. Each stdin line is a JSON
// string; each stdout line is {"ids": [...], "decoded": "...", "prompt_ids": [...]} for it: its
// encoding, the decoding of that encoding, and its encoding as a prompt (encode_prompt).
// usage: zt_tokenizer_driver tokenizer.json < texts.jsonl
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/app/data/tokenizer.h"
#include "engine/base/core/check.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: zt_tokenizer_driver tokenizer.json < texts.jsonl\n");
    return 2;
  }
  try {
    const zt::data::Tokenizer tok = zt::data::Tokenizer::load(argv[1]);
    std::string line;
    while (std::getline(std::cin, line)) {
      const std::string text = nlohmann::json::parse(line).get<std::string>();
      const std::vector<std::int32_t> ids = tok.encode(text);
      const nlohmann::json out = {{"ids", ids}, {"decoded", tok.decode(ids)}, {"prompt_ids", tok.encode_prompt(text)}};
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  } catch (const zt::InputError& e) {
    fmt::print(stderr, "zt_tokenizer_driver: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
