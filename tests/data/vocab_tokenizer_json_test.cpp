// A vocabulary as a Hugging Face tokenizer.json and back (data/vocab_tokenizer_json.h): the
// character form reads back as the same vocabulary, the byte form as a byte-level Tokenizer that
// numbers bytes as the byte vocabulary does, other tokenizers are not taken for a character one,
// and ids that do not number the tokens once each are refused naming the file. (transformers'
// reading of both forms: tests/data/vocab_export_test.py.)
#include "engine/app/data/vocab_tokenizer_json.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <vector>

#include "engine/app/data/tokenizer.h"
#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::expect_input_error;

// 1-, 2-, 3- and 4-byte characters.
const std::string kExportedText = "h\xC3\xA9llo \xE4\xB8\x96 \xF0\x9F\x98\x80!\n";

TEST(VocabTokenizerJson, CharacterFormReadsBackAsTheSameVocabulary) {
  const Vocab v = Vocab::build_char(kExportedText);
  const nlohmann::json j = nlohmann::json::parse(tokenizer_json_of_vocab(v).dump());
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_TRUE(j["model"]["merges"].empty());
  EXPECT_TRUE(j["pre_tokenizer"].is_null());
  EXPECT_EQ(j["decoder"]["type"], "Fuse");
  const std::optional<Vocab> back = char_vocab_of_tokenizer_json(j, "t.json");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->pieces(), v.pieces());
  EXPECT_EQ(back->encode(kExportedText), v.encode(kExportedText));
}

TEST(VocabTokenizerJson, ByteFormIsAByteLevelTokenizerNumberingBytesAsTheVocabulary) {
  const Vocab v = Vocab::byte_level();
  const nlohmann::json j = nlohmann::json::parse(tokenizer_json_of_vocab(v).dump());
  EXPECT_FALSE(char_vocab_of_tokenizer_json(j, "t.json").has_value());
  const Tokenizer t = Tokenizer::from_json(j, "t.json");
  std::string bytes = kExportedText;
  for (int b = 0; b < 256; ++b) bytes += static_cast<char>(b);
  std::vector<std::int32_t> want;
  for (const std::uint16_t id : v.encode(bytes)) want.push_back(id);
  EXPECT_EQ(t.encode(bytes), want);
  EXPECT_EQ(t.decode(want), bytes);
  EXPECT_EQ(t.vocab_size(), 256);
}

TEST(VocabTokenizerJson, OtherTokenizersAreNotACharacterOne) {
  nlohmann::json j = nlohmann::json::parse(tokenizer_json_of_vocab(Vocab::build_char("ab")).dump());
  nlohmann::json with_merge = j, with_pre = j, other_decoder = j, with_added = j;
  with_merge["model"]["merges"] = {"a b"};
  with_pre["pre_tokenizer"] = {{"type", "Whitespace"}};
  other_decoder["decoder"] = {{"type", "ByteLevel"}};
  with_added["added_tokens"] = nlohmann::json::array({{{"id", 2}, {"content", "<s>"}}});
  for (const nlohmann::json& t : {with_merge, with_pre, other_decoder, with_added, nlohmann::json::array()}) {
    EXPECT_FALSE(char_vocab_of_tokenizer_json(t, "t.json").has_value()) << t.dump();
  }
}

TEST(VocabTokenizerJson, IdsThatDoNotNumberTheTokensOnceAreRefused) {
  nlohmann::json j = nlohmann::json::parse(tokenizer_json_of_vocab(Vocab::build_char("abc")).dump());
  nlohmann::json twice = j, past = j, multi = j;
  twice["model"]["vocab"]["c"] = 0;
  past["model"]["vocab"]["c"] = 7;
  expect_input_error([&] { char_vocab_of_tokenizer_json(twice, "t.json"); }, {"t.json", "'c'", "once each"});
  expect_input_error([&] { char_vocab_of_tokenizer_json(past, "t.json"); }, {"t.json", "'c'", "0..2"});
  multi["model"]["vocab"].erase("c");
  multi["model"]["vocab"]["cd"] = 2;
  expect_input_error([&] { char_vocab_of_tokenizer_json(multi, "t.json"); }, {"t.json", "exactly one character"});
}

// A tokenizer.json's ids are whole numbers from 0 (a template's special-token ids were read unchecked:
// -7 failed an internal check at the first sample, 2^40 was read as token 0, 3.7 as 3); an added
// token of empty content is left out (matched at every position, a prompt's encoding grew without
// end); a decoder or model whose "type" is no string is not the character form, nor a crash.
TEST(VocabTokenizerJson, HostileIdsAndTokensAreRefusedNamingTheFile) {
  const nlohmann::json byte_form = nlohmann::json::parse(tokenizer_json_of_vocab(Vocab::byte_level()).dump());
  for (const nlohmann::json& id : {nlohmann::json(-7), nlohmann::json(1ll << 40), nlohmann::json(3.7)}) {
    nlohmann::json j = byte_form;
    j["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "X"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"X", {{"id", "X"}, {"ids", {id}}, {"tokens", {"X"}}}}}}};
    expect_input_error([&] { Tokenizer::from_json(j, "t.json"); }, {"t.json", "token 'X' has id " + id.dump()});
    nlohmann::json vocab_id = byte_form;
    vocab_id["model"]["vocab"].begin().value() = id;
    expect_input_error([&] { Tokenizer::from_json(vocab_id, "t.json"); }, {"t.json", "has id " + id.dump()});
  }
  nlohmann::json empty = byte_form;
  empty["added_tokens"] = nlohmann::json::array({{{"id", 256}, {"content", ""}}});
  EXPECT_EQ(Tokenizer::from_json(empty, "t.json").encode("hi"), Tokenizer::from_json(byte_form, "t.json").encode("hi"))
      << "an added token of empty content is left out, as the tokenizers library leaves it";
  nlohmann::json chars = nlohmann::json::parse(tokenizer_json_of_vocab(Vocab::build_char("ab")).dump());
  nlohmann::json numbered_decoder = chars, numbered_model = chars;
  numbered_decoder["decoder"]["type"] = 5;
  numbered_model["model"]["type"] = 5;
  for (const nlohmann::json& j : {numbered_decoder, numbered_model}) {
    EXPECT_FALSE(char_vocab_of_tokenizer_json(j, "t.json").has_value()) << j.dump();
    expect_input_error([&] { Tokenizer::from_json(j, "t.json"); }, {"t.json"});
  }
}

// Ids may skip numbers (added tokens far past the vocabulary): a tokenizer holds what it names,
// not a table up to its largest id (an id of 2^24 - 1, the largest taken, made 16 M strings:
// 512 MiB for a file of 100 bytes).
TEST(VocabTokenizerJson, AFarIdCostsWhatItsTokenDoes) {
  nlohmann::json j = nlohmann::json::parse(tokenizer_json_of_vocab(Vocab::byte_level()).dump());
  const std::int32_t far = (1 << 24) - 1;
  j["added_tokens"] = nlohmann::json::array({{{"id", far}, {"content", "<|far|>"}}});
  const std::size_t before = mallinfo2().uordblks + mallinfo2().hblkhd;
  const Tokenizer t = Tokenizer::from_json(j, "t.json");
  const std::size_t held = mallinfo2().uordblks + mallinfo2().hblkhd - before;
  EXPECT_LT(held, std::size_t{16} << 20) << "bytes held by a tokenizer of 257 tokens";
  EXPECT_EQ(t.vocab_size(), far + 1);
  EXPECT_TRUE(t.has_id(far));
  EXPECT_TRUE(t.has_id(255));
  EXPECT_FALSE(t.has_id(256));
  EXPECT_FALSE(t.has_id(far + 1));
  const std::vector<std::int32_t> ids = {far, 256, 'a'};
  EXPECT_EQ(t.decode(ids), "<|far|>a") << "an id that names no token is skipped";
}

}  // namespace
}  // namespace zt::data
