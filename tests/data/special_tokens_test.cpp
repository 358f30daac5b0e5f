// data::special_token_ids: tokenizer_config.json's bos/eos/pad tokens numbered by tokenizer.json
// (added tokens first, then the model's vocabulary), in both forms transformers writes a token
// (a string, an AddedToken object); tokens not named or not held left out; no files, no ids; a
// malformed file refused in one line naming it.
#include "engine/app/data/special_tokens.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/base/core/check.h"
#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::expect_input_error;

void write(const std::filesystem::path& p, const std::string& text) { testing::write_file(p.string(), text); }

TEST(SpecialTokens, IdsFromTheConfigsNamesAndTheTokenizersNumbers) {
  const std::filesystem::path dir = testing::temp_path("special_tokens");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  EXPECT_EQ(special_token_ids(dir.string()), nlohmann::json::object()) << "no files";
  // "<|end|>" is both an added token (7) and in the vocabulary (3): the added token's id wins.
  write(dir / "tokenizer.json", R"({"added_tokens": [{"id": 7, "content": "<|end|>"}, {"id": 9, "content": "<s>"}],
                                    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "<pad>": 2, "<|end|>": 3}}})");
  write(dir / "tokenizer_config.json", R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "<|end|>",
                                           "pad_token": "<pad>", "unk_token": "a"})");
  EXPECT_EQ(special_token_ids(dir.string()),
            (nlohmann::json{{"bos_token_id", 9}, {"eos_token_id", 7}, {"pad_token_id", 2}}));
  write(dir / "tokenizer_config.json", R"({"bos_token": null, "eos_token": "<|missing|>"})");
  EXPECT_EQ(special_token_ids(dir.string()), nlohmann::json::object()) << "null and unknown tokens left out";
  write(dir / "tokenizer_config.json", R"({"eos_token": 5})");
  expect_input_error([&] { special_token_ids(dir.string()); }, {"tokenizer_config.json", "eos_token", "got 5"});
  write(dir / "tokenizer_config.json", R"({"eos_token": "<|end|>"})");
  write(dir / "tokenizer.json", R"({"added_tokens": [{"id": 7, "content": 7}]})");
  expect_input_error([&] { special_token_ids(dir.string()); }, {dir.string(), "special token"});
  write(dir / "tokenizer_config.json", "{not json");
  expect_input_error([&] { special_token_ids(dir.string()); }, {"tokenizer_config.json", "not valid JSON"});
  std::filesystem::remove_all(dir);
}

// A tokenizer.json alone (the tokenizers library's, no tokenizer_config.json): bos and eos its
// document delimiter, what tools/prepare_tokens.py starts each document with; Llama 3's pair apart.
TEST(SpecialTokens, ATokenizerAloneBeginsAndEndsWithItsDocumentDelimiter) {
  const std::filesystem::path dir = testing::temp_path("special_tokens_alone");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  write(dir / "tokenizer.json", R"({"added_tokens": [{"id": 51000, "content": "<|endoftext|>"}],
                                    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}})");
  EXPECT_EQ(special_token_ids(dir.string()), (nlohmann::json{{"bos_token_id", 51000}, {"eos_token_id", 51000}}));
  write(dir / "tokenizer.json", R"({"added_tokens": [{"id": 128000, "content": "<|begin_of_text|>"},
                                                     {"id": 128001, "content": "<|end_of_text|>"}],
                                    "model": {"type": "BPE", "vocab": {"a": 0}}})");
  EXPECT_EQ(special_token_ids(dir.string()), (nlohmann::json{{"bos_token_id", 128000}, {"eos_token_id", 128001}}));
  write(dir / "tokenizer.json", R"({"added_tokens": [], "model": {"type": "BPE", "vocab": {"a": 0}}})");
  EXPECT_EQ(special_token_ids(dir.string()), nlohmann::json::object()) << "no delimiter, no ids";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace zt::data
