// Vocabularies: char-level build/encode/decode round-trips multi-byte UTF-8, byte level
// round-trips any bytes, save/load round-trips, and invalid text, unknown characters and damaged
// vocabulary files are refused with messages naming the offset or the file.
#include "engine/app/data/vocab.h"

#include <gtest/gtest.h>

#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::expect_input_error;
using testing::temp_path;
using testing::write_file;

std::vector<std::int32_t> as_ids(const std::vector<std::uint16_t>& tokens) { return {tokens.begin(), tokens.end()}; }

// 1-, 2-, 3- and 4-byte characters: ASCII, é, ü, 世, 界, € and an emoji.
const std::string kText = "h\xC3\xA9llo w\xC3\xBCrld \xE4\xB8\x96\xE7\x95\x8C \xE2\x82\xAC 5 \xF0\x9F\x98\x80!\n";

TEST(Vocab, CharLevelRoundTripsMultiByteText) {
  const Vocab v = Vocab::build_char(kText);
  EXPECT_EQ(v.kind(), Vocab::Kind::kChar);
  // Distinct code points: h e-acute l o space w u-umlaut r d 世 界 € 5 emoji ! newline.
  EXPECT_EQ(v.size(), 16);
  const std::vector<std::uint16_t> ids = v.encode(kText);
  EXPECT_EQ(ids.size(), 22u) << "one token per code point";
  EXPECT_EQ(v.decode(as_ids(ids)), kText);
  // Sorted by code point: '\n' (U+000A) is token 0, the emoji (U+1F600) the last.
  EXPECT_EQ(v.decode(std::vector<std::int32_t>{0}), "\n");
  EXPECT_EQ(v.decode(std::vector<std::int32_t>{15}), "\xF0\x9F\x98\x80");
}

TEST(Vocab, DecodesOutOfRangeIdsAsReplacementCharacter) {
  const Vocab v = Vocab::build_char("ab");
  EXPECT_EQ(v.decode(std::vector<std::int32_t>{0, -1, 2, 1}),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
}

TEST(Vocab, ByteLevelRoundTripsArbitraryBytes) {
  const Vocab v = Vocab::byte_level();
  EXPECT_EQ(v.kind(), Vocab::Kind::kByte);
  EXPECT_EQ(v.size(), 256);
  std::string bytes;
  for (int b = 255; b >= 0; --b) bytes += static_cast<char>(b);
  bytes += kText;
  const std::vector<std::uint16_t> ids = v.encode(bytes);
  ASSERT_EQ(ids.size(), bytes.size());
  EXPECT_EQ(ids[0], 255);
  EXPECT_EQ(v.decode(as_ids(ids)), bytes);
}

TEST(Vocab, SaveLoadRoundTripsBothKinds) {
  const std::string char_path = temp_path("vocab_char.json"), byte_path = temp_path("vocab_byte.json");
  const Vocab c = Vocab::build_char(kText);
  c.save(char_path);
  const Vocab c2 = Vocab::load(char_path);
  EXPECT_EQ(c2.kind(), Vocab::Kind::kChar);
  EXPECT_EQ(c2.encode(kText), c.encode(kText));
  Vocab::byte_level().save(byte_path);
  const Vocab b2 = Vocab::load(byte_path);
  EXPECT_EQ(b2.kind(), Vocab::Kind::kByte);
  EXPECT_EQ(b2.size(), 256);
}

TEST(Vocab, RefusesInvalidUtf8WithItsByteOffset) {
  expect_input_error(
      [] {
        Vocab::build_char(
            "abc\xFF"
            "def");
      },
      {"invalid UTF-8", "0xFF", "byte offset 3"});
  expect_input_error([] { Vocab::build_char("ab\xC3"); }, {"truncated", "byte offset 2"});
  expect_input_error([] { Vocab::build_char("a\xC3(b"); }, {"not a continuation byte", "byte offset 2"});
  expect_input_error([] { Vocab::build_char("x\xC0\xAF"); }, {"overlong", "byte offset 1"});
  expect_input_error([] { Vocab::build_char("\xED\xA0\x80"); }, {"surrogate", "byte offset 0"});
  expect_input_error([] { Vocab::build_char(""); }, {"empty"});
  const Vocab v = Vocab::build_char("abc");
  expect_input_error([&] { v.encode("ab\x80"); }, {"invalid UTF-8", "byte offset 2"});
}

TEST(Vocab, EncodeNamesTheFirstUnknownCharacter) {
  const Vocab v = Vocab::build_char("hello world");
  expect_input_error([&] { v.encode("hello w\xC3\xB6rld!"); },
                     {"U+00F6 '\xC3\xB6'", "byte offset 7", "not in the vocabulary"});
  expect_input_error([&] { v.encode("hello\tworld"); }, {"U+0009", "byte offset 5"});
}

TEST(Vocab, LoadRefusesDamagedFilesNamingThem) {
  struct Case {
    const char* name;
    const char* json;
    const char* fragment;
  };
  const Case cases[] = {
      {"not_json", "{\"format\": \"zerotrain-vocab\", ", "not valid JSON at line 1, column 31 (the text ends"},
      {"empty", " \n", "the file is empty (not JSON)"},  // it said an object was left open
      {"wrong_format", R"({"format": "gpt2", "version": 1, "kind": "char", "tokens": ["a"]})", "format"},
      {"wrong_version", R"({"format": "zerotrain-vocab", "version": 2, "kind": "char", "tokens": ["a"]})",
       "unsupported vocabulary version 2"},
      {"wrong_kind", R"({"format": "zerotrain-vocab", "version": 1, "kind": "word", "tokens": ["a"]})", "kind"},
      {"no_tokens", R"({"format": "zerotrain-vocab", "version": 1, "kind": "char"})", "no \"tokens\""},
      {"duplicate", R"({"format": "zerotrain-vocab", "version": 1, "kind": "char", "tokens": ["a", "b", "a"]})",
       "token 2 is a duplicate"},
      {"non_string", R"({"format": "zerotrain-vocab", "version": 1, "kind": "char", "tokens": ["a", 7]})",
       "token 1 is not a string"},
      {"multi_char", R"({"format": "zerotrain-vocab", "version": 1, "kind": "char", "tokens": ["a", "bc"]})",
       "token 1 is not exactly one character"},
      {"bad_byte_list", R"({"format": "zerotrain-vocab", "version": 1, "kind": "byte", "tokens": [0, 1]})", "0..255"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = temp_path(std::string("vocab_") + c.name + ".json");
    write_file(path, c.json);
    expect_input_error([&] { Vocab::load(path); }, {path, c.fragment});
  }
  expect_input_error([] { Vocab::load(temp_path("vocab_missing.json")); }, {"vocab_missing.json", "cannot open"});
}

TEST(Vocab, LoadRefusesMoreThan65535Tokens) {
  std::string json = R"({"format": "zerotrain-vocab", "version": 1, "kind": "char", "tokens": [)";
  for (int i = 0; i < 65536; ++i) json += (i ? ",\"x\"" : "\"x\"");
  json += "]}";
  const std::string path = temp_path("vocab_too_big.json");
  write_file(path, json);
  expect_input_error([&] { Vocab::load(path); }, {path, "65536 tokens", "at most 65535"});
}

}  // namespace
}  // namespace zt::data
