// data::TokenText over a tokenizer folder: an empty prompt starts where transformers' generate
// does (the tokenizer_config.json bos_token beside it, else the tokenizer's document delimiter),
// and sampling learns which ids a tokenizer whose ids skip numbers has no token for.
#include "engine/app/data/token_text.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/app/data/vocab.h"
#include "engine/app/data/vocab_tokenizer_json.h"
#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

// A byte-level tokenizer (ids 0-255) with <|endoftext|> at 256 and <|begin_of_text|> at 300: ids
// 257-299 name no token.
std::filesystem::path tokenizer_folder(const std::string& name) {
  const std::filesystem::path dir = testing::temp_path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  nlohmann::json j = nlohmann::json::parse(tokenizer_json_of_vocab(Vocab::byte_level()).dump());
  j["added_tokens"] = nlohmann::json::array({{{"id", 256}, {"content", "<|endoftext|>"}, {"special", true}},
                                             {{"id", 300}, {"content", "<|begin_of_text|>"}, {"special", true}}});
  testing::write_file((dir / "tokenizer.json").string(), j.dump());
  return dir;
}

TEST(TokenText, AnEmptyPromptStartsAtTheConfigsBosTokenElseTheDelimiter) {
  const std::filesystem::path dir = tokenizer_folder("token_text_bos");
  EXPECT_EQ(TokenText::from_dir(dir.string()).encode_prompt(""), std::vector<std::int32_t>{256})
      << "no tokenizer_config.json: the first delimiter it has";
  testing::write_file((dir / "tokenizer_config.json").string(), R"({"bos_token": "<|begin_of_text|>"})");
  EXPECT_EQ(TokenText::from_dir(dir.string()).encode_prompt(""), std::vector<std::int32_t>{300})
      << "its bos_token, where generate() starts (it started from <|endoftext|>)";
  testing::write_file((dir / "tokenizer_config.json").string(), R"({"bos_token": "<|not_there|>"})");
  EXPECT_EQ(TokenText::from_dir(dir.string()).encode_prompt(""), std::vector<std::int32_t>{256});
}

TEST(TokenText, IdsWithoutATokenAreNotDecodable) {
  const TokenText text = TokenText::from_dir(tokenizer_folder("token_text_gaps").string());
  ASSERT_EQ(text.size(), 301);
  const std::vector<bool> decodable = text.decodable();
  ASSERT_EQ(decodable.size(), 301u);
  for (int id = 0; id < 301; ++id) EXPECT_EQ(decodable[static_cast<std::size_t>(id)], id <= 256 || id == 300) << id;
  EXPECT_TRUE(TokenText(Vocab::build_char("abc")).decodable().empty()) << "a vocabulary decodes every id";
}

}  // namespace
}  // namespace zt::data
