// A Hugging Face folder's config.json as train.init_from and sample --from read it: the special
// tokens' ids a run carries into its exports are tokens of the model's vocabulary (one, or a list),
// or none (an id of 2^40 or -1 was carried into every export's config.json).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/app/io/pretrained.h"
#include "tests/data/data_test_util.h"

namespace zt {
namespace {

TEST(PretrainedConfig, SpecialTokenIdsOutsideTheVocabularyAreNotCarried) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "hf_special_ids";
  std::filesystem::create_directories(dir);
  nlohmann::json config = {{"model_type", "gpt2"}, {"n_layer", 1},
                           {"n_head", 2},          {"n_embd", 8},
                           {"n_positions", 16},    {"vocab_size", 50},
                           {"bos_token_id", 49},   {"eos_token_id", 3},
                           {"pad_token_id", 0},    {"architectures", {"GPT2LMHeadModel"}}};
  std::ofstream(dir / "config.json") << config.dump();
  EXPECT_EQ(read_pretrained_model(dir.string()).special_token_ids,
            (nlohmann::json{{"bos_token_id", 49}, {"eos_token_id", 3}, {"pad_token_id", 0}}));
  config["bos_token_id"] = std::int64_t{1} << 40;
  config["eos_token_id"] = 50;
  config["pad_token_id"] = -1;
  std::ofstream(dir / "config.json") << config.dump();
  EXPECT_EQ(read_pretrained_model(dir.string()).special_token_ids, nlohmann::json::object());
  config["eos_token_id"] = {1, 2};  // several, as instruct models list the tokens a turn ends with
  std::ofstream(dir / "config.json") << config.dump();
  EXPECT_EQ(read_pretrained_model(dir.string()).special_token_ids, (nlohmann::json{{"eos_token_id", {1, 2}}}));
  config["eos_token_id"] = {1, 50};  // one of them outside the vocabulary: the others carried (generate stops there)
  std::ofstream(dir / "config.json") << config.dump();
  EXPECT_EQ(read_pretrained_model(dir.string()).special_token_ids, (nlohmann::json{{"eos_token_id", {1}}}));
  config["eos_token_id"] = {-1, 50};
  std::ofstream(dir / "config.json") << config.dump();
  EXPECT_EQ(read_pretrained_model(dir.string()).special_token_ids, nlohmann::json::object());
  config["eos_token_id"] = nlohmann::json::array();
  std::ofstream(dir / "config.json") << config.dump();
  EXPECT_EQ(read_pretrained_model(dir.string()).special_token_ids, nlohmann::json::object());
}

// generation_config.json's eos_token_id before config.json's, as from_pretrained sets up generate:
// its ids in the vocabulary; absent or null there, none; a file that does not parse, or is not an
// object, is left for config.json's (transformers falls back to the model's config).
TEST(PretrainedConfig, GenerationConfigsEndOfTextTokensComeFirst) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "hf_generation_ids";
  std::filesystem::create_directories(dir);
  const nlohmann::json config = {{"model_type", "gpt2"}, {"n_layer", 1},      {"n_head", 2},
                                 {"n_embd", 8},          {"n_positions", 16}, {"vocab_size", 50},
                                 {"bos_token_id", 49},   {"eos_token_id", 3}, {"architectures", {"GPT2LMHeadModel"}}};
  std::ofstream(dir / "config.json") << config.dump();
  const auto ids_with = [&](const std::string& generation) {
    std::ofstream(dir / "generation_config.json") << generation;
    return read_pretrained_model(dir.string()).special_token_ids;
  };
  EXPECT_EQ(ids_with(R"({"eos_token_id": [7, 50, 8]})"),
            (nlohmann::json{{"bos_token_id", 49}, {"eos_token_id", {7, 8}}}));
  EXPECT_EQ(ids_with(R"({"eos_token_id": 9, "bos_token_id": 1})"),
            (nlohmann::json{{"bos_token_id", 49}, {"eos_token_id", 9}}));
  EXPECT_EQ(ids_with(R"({"max_length": 20})"), (nlohmann::json{{"bos_token_id", 49}}));
  EXPECT_EQ(ids_with(R"({"eos_token_id": null})"), (nlohmann::json{{"bos_token_id", 49}}));
  EXPECT_EQ(ids_with(R"({"eos_token_id": 50})"), (nlohmann::json{{"bos_token_id", 49}}));
  EXPECT_EQ(ids_with(R"({"eos_token_id": )"), (nlohmann::json{{"bos_token_id", 49}, {"eos_token_id", 3}}));
  EXPECT_EQ(ids_with("[1, 2]"), (nlohmann::json{{"bos_token_id", 49}, {"eos_token_id", 3}}));
  // Not a regular file: refused naming it, as every input (a FIFO hung every command that reads the
  // folder; a directory failed with the stream's words, exit 1).
  std::filesystem::remove(dir / "generation_config.json");
  ASSERT_EQ(mkfifo((dir / "generation_config.json").c_str(), 0600), 0);
  data::testing::expect_input_error([&] { read_pretrained_model(dir.string()); },
                                    {"generation_config.json", "FIFO that nothing writes"});
  std::filesystem::remove(dir / "generation_config.json");
  std::filesystem::create_directory(dir / "generation_config.json");
  data::testing::expect_input_error([&] { read_pretrained_model(dir.string()); },
                                    {"generation_config.json", "is a directory"});
  std::filesystem::remove(dir / "generation_config.json");
}

}  // namespace
}  // namespace zt
