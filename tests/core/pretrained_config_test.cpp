// A Hugging Face folder's config.json as train.init_from and sample --from read it: the special
// tokens' ids a run carries into its exports are tokens of the model's vocabulary (one, or a list),
// or none (an id of 2^40 or -1 was carried into every export's config.json).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/app/io/pretrained.h"

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
  config["eos_token_id"] = {1, 50};  // one of them outside the vocabulary: none carried
  std::ofstream(dir / "config.json") << config.dump();
  EXPECT_EQ(read_pretrained_model(dir.string()).special_token_ids, nlohmann::json::object());
  config["eos_token_id"] = nlohmann::json::array();
  std::ofstream(dir / "config.json") << config.dump();
  EXPECT_EQ(read_pretrained_model(dir.string()).special_token_ids, nlohmann::json::object());
}

}  // namespace
}  // namespace zt
