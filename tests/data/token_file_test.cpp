// Token files: llm.c and nanoGPT files read back what was written, the format is detected, and
// every kind of damaged file is refused with its own one-line message naming the file.
#include "engine/app/data/token_file.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::expect_input_error;
using testing::read_file;
using testing::temp_path;
using testing::write_file;

// An llm.c file's bytes with the given header fields and tokens.
std::string llmc_bytes(std::int32_t magic, std::int32_t version, std::int32_t count,
                       const std::vector<std::uint16_t>& tokens) {
  std::string bytes(static_cast<std::size_t>(kLlmcHeaderBytes) + 2 * tokens.size(), '\0');
  const std::int32_t fields[3] = {magic, version, count};
  std::memcpy(bytes.data(), fields, sizeof(fields));
  std::memcpy(bytes.data() + kLlmcHeaderBytes, tokens.data(), 2 * tokens.size());
  return bytes;
}

std::string raw_bytes(const std::vector<std::uint16_t>& tokens) {
  return std::string(reinterpret_cast<const char*>(tokens.data()), 2 * tokens.size());
}

const std::vector<std::uint16_t> kTokens = {0, 1, 64, 7, 12, 3, 64, 0};

TEST(TokenFile, LlmcRoundTripWritesTheStandardLayout) {
  const std::string path = temp_path("round_trip.bin");
  write_llmc_token_file(path, kTokens);
  EXPECT_EQ(read_file(path), llmc_bytes(kLlmcTokenMagic, kLlmcTokenVersion, 8, kTokens));
  const TokenFile f = TokenFile::open(path, TokenFileFormat::kLlmc, 65);
  EXPECT_EQ(f.format(), TokenFileFormat::kLlmc);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(std::vector<std::uint16_t>(f.tokens().begin(), f.tokens().end()), kTokens);
}

TEST(TokenFile, NanoGptRawFileReadsEveryToken) {
  const std::string path = temp_path("raw.bin");
  write_file(path, raw_bytes(kTokens));
  const TokenFile f = TokenFile::open(path, TokenFileFormat::kNanoGpt, 65);
  EXPECT_EQ(f.format(), TokenFileFormat::kNanoGpt);
  EXPECT_EQ(std::vector<std::uint16_t>(f.tokens().begin(), f.tokens().end()), kTokens);
}

TEST(TokenFile, AutoDetectsTheFormatFromTheMagic) {
  const std::string llmc = temp_path("auto_llmc.bin"), raw = temp_path("auto_raw.bin");
  write_llmc_token_file(llmc, kTokens);
  write_file(raw, raw_bytes(kTokens));
  const TokenFile a = TokenFile::open(llmc, TokenFileFormat::kAuto, 65);
  const TokenFile b = TokenFile::open(raw, TokenFileFormat::kAuto, 65);
  EXPECT_EQ(a.format(), TokenFileFormat::kLlmc);
  EXPECT_EQ(b.format(), TokenFileFormat::kNanoGpt);
  EXPECT_EQ(a.tokens().size(), kTokens.size());
  EXPECT_EQ(b.tokens().size(), kTokens.size());
}

TEST(TokenFile, MovedFileKeepsItsMapping) {
  const std::string path = temp_path("move.bin");
  write_llmc_token_file(path, kTokens);
  TokenFile a = TokenFile::open(path, TokenFileFormat::kAuto, 65);
  TokenFile b = std::move(a);
  EXPECT_EQ(b.tokens()[2], 64);
  a = std::move(b);
  EXPECT_EQ(a.tokens().size(), kTokens.size());
}

TEST(TokenFile, ParsesFormatNames) {
  TokenFileFormat f = TokenFileFormat::kAuto;
  EXPECT_TRUE(parse_token_file_format("llmc", &f));
  EXPECT_EQ(f, TokenFileFormat::kLlmc);
  EXPECT_TRUE(parse_token_file_format("nanogpt", &f));
  EXPECT_EQ(f, TokenFileFormat::kNanoGpt);
  EXPECT_TRUE(parse_token_file_format("auto", &f));
  EXPECT_EQ(f, TokenFileFormat::kAuto);
  EXPECT_FALSE(parse_token_file_format("llm.c", &f));
}

TEST(TokenFile, RefusesBadMagic) {
  const std::string path = temp_path("bad_magic.bin");
  write_file(path, llmc_bytes(12345, 1, 8, kTokens));
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kLlmc, 65); }, {path, "bad magic", "12345"});
}

TEST(TokenFile, RefusesUnsupportedVersion) {
  const std::string path = temp_path("bad_version.bin");
  write_file(path, llmc_bytes(kLlmcTokenMagic, 2, 8, kTokens));
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65); }, {path, "unsupported version 2"});
}

TEST(TokenFile, RefusesTruncatedFile) {
  const std::string path = temp_path("truncated.bin");
  std::string bytes = llmc_bytes(kLlmcTokenMagic, 1, 8, kTokens);
  bytes.resize(bytes.size() - 4);  // two tokens missing
  write_file(path, bytes);
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65); },
                     {path, "file is 1036 bytes but the header's token count (8) implies 1040"});
}

TEST(TokenFile, RefusesOversizedFile) {
  const std::string path = temp_path("oversized.bin");
  write_file(path, llmc_bytes(kLlmcTokenMagic, 1, 6, kTokens));  // header says 6, file holds 8
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kLlmc, 65); },
                     {path, "file is 1040 bytes but the header's token count (6) implies 1036"});
}

TEST(TokenFile, RefusesFileShorterThanTheHeader) {
  const std::string path = temp_path("short_header.bin");
  write_file(path, raw_bytes(kTokens));
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kLlmc, 65); }, {path, "16 bytes", "header"});
}

TEST(TokenFile, RefusesOddSizedRawFile) {
  const std::string path = temp_path("odd.bin");
  write_file(path, raw_bytes(kTokens) + "x");
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kNanoGpt, 65); }, {path, "odd size (17 bytes)"});
}

TEST(TokenFile, RefusesEmptyFile) {
  const std::string path = temp_path("empty.bin");
  write_file(path, "");
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65); }, {path, "empty"});
}

TEST(TokenFile, RefusesLlmcFileWithNoTokens) {
  const std::string path = temp_path("no_tokens.bin");
  write_llmc_token_file(path, {});
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65); }, {path, "no tokens"});
}

TEST(TokenFile, RefusesMissingFile) {
  const std::string path = temp_path("does_not_exist.bin");
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65); }, {path, "cannot open"});
}

TEST(TokenFile, RefusesOutOfRangeTokenInLlmcFile) {
  const std::string path = temp_path("range_llmc.bin");
  std::vector<std::uint16_t> tokens = kTokens;
  tokens[5] = 70;
  write_llmc_token_file(path, tokens);
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65); },
                     {path, "token 70 at position 5 is outside the vocabulary (size 65)"});
}

// 16-bit tokens for a vocabulary past 65,536 (Llama 3's 128,256): its ids above 65,535 wrapped when
// the file was written (nanoGPT's prepare.py writes uint16 whatever the tokenizer), so each 16-bit
// format is refused; at 65,536 every id still fits.
TEST(TokenFile, RefusesSixteenBitTokensForAVocabularyPastThem) {
  const std::string llmc = temp_path("narrow_llmc.bin"), raw = temp_path("narrow_raw.bin");
  write_llmc_token_file(llmc, kTokens);
  write_file(raw, raw_bytes(kTokens));
  for (const std::string& path : {llmc, raw}) {
    expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 128256, TokenCheck::kHeader); },
                       {path, "uint16 tokens cannot hold ids of a vocabulary of 128256", "uint32"});
    EXPECT_NO_THROW(TokenFile::open(path, TokenFileFormat::kAuto, 65536));
  }
}

TEST(TokenFile, RefusesOutOfRangeTokenInRawFile) {
  const std::string path = temp_path("range_raw.bin");
  std::vector<std::uint16_t> tokens = kTokens;
  tokens[7] = 65535;
  write_file(path, raw_bytes(tokens));
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kNanoGpt, 50257); },
                     {path, "token 65535 at position 7 is outside the vocabulary (size 50257)"});
}

}  // namespace
}  // namespace zt::data

namespace zt::data {
namespace {

// Llama 3's kind of llm.c file: magic 20240801, version 7, uint32 tokens.
std::string llmc32_bytes(std::int32_t magic, std::int32_t version, const std::vector<std::uint32_t>& tokens) {
  std::string bytes(static_cast<std::size_t>(kLlmcHeaderBytes) + 4 * tokens.size(), '\0');
  const std::int32_t fields[3] = {magic, version, static_cast<std::int32_t>(tokens.size())};
  std::memcpy(bytes.data(), fields, sizeof(fields));
  std::memcpy(bytes.data() + kLlmcHeaderBytes, tokens.data(), 4 * tokens.size());
  return bytes;
}

const std::vector<std::uint32_t> kWideTokens = {0, 70000, 128255, 65535, 65536, 3};

TEST(TokenFile, Uint32LlmcFileReadsTokensAboveUint16) {
  const std::string path = temp_path("llama3.bin");
  write_file(path, llmc32_bytes(kLlmcToken32Magic, kLlmcToken32Version, kWideTokens));
  for (TokenFileFormat format : {TokenFileFormat::kAuto, TokenFileFormat::kLlmc}) {
    const TokenFile f = TokenFile::open(path, format, 128256);
    EXPECT_EQ(f.format(), TokenFileFormat::kLlmc);
    EXPECT_EQ(f.bytes_per_token(), 4);
    EXPECT_EQ(std::vector<std::uint32_t>(f.tokens().begin(), f.tokens().end()), kWideTokens);
  }
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 128255); },
                     {path, "token 128255 at position 2", "size 128255"});
}

TEST(TokenFile, Uint32LlmcFileIsHeldToItsOwnVersionAndSize) {
  const std::string path = temp_path("llama3_bad.bin");
  write_file(path, llmc32_bytes(kLlmcToken32Magic, 1, kWideTokens));
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 128256); },
                     {path, "unsupported version 1", "magic 20240801 has version 7"});
  std::string truncated = llmc32_bytes(kLlmcToken32Magic, kLlmcToken32Version, kWideTokens);
  truncated.resize(truncated.size() - 2);
  write_file(path, truncated);
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kLlmc, 128256); }, {path, "implies"});
}

// An llm.c-style header with a magic nobody knows is refused under auto, naming the magic, for
// either token width, instead of being read as raw uint16 tokens (header included).
TEST(TokenFile, AutoRefusesAnUnknownMagicInAnLlmcStyleHeader) {
  const std::string path = temp_path("unknown_magic.bin");
  write_file(path, llmc32_bytes(20250101, 1, kWideTokens));
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 1 << 20); },
                     {path, "unknown magic 20250101", "20240520", "20240801"});
  write_file(path, llmc_bytes(20230000, 3, static_cast<std::int32_t>(kTokens.size()), kTokens));
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65); }, {path, "unknown magic 20230000"});
  // Stated as raw, it reads as raw (the user's word); 65,536: every 16-bit value is in the vocabulary.
  EXPECT_EQ(TokenFile::open(path, TokenFileFormat::kNanoGpt, 65536).format(), TokenFileFormat::kNanoGpt);
}

// A damaged llm.c token file: another magic and a size its count does not give, or a wiped header.
// Its zero padding past the third word marks it (it was read as raw tokens, header and all, and
// trained where the vocabulary held the header's words).
TEST(TokenFile, AutoRefusesADamagedLlmcHeaderByItsPadding) {
  const std::string path = temp_path("damaged_header.bin");
  std::string bytes = llmc_bytes(20240521, 1, 8, kTokens);
  bytes.resize(bytes.size() - 2);  // the count no longer gives the size either
  write_file(path, bytes);
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65536); },
                     {path, "unknown magic 20240521", "zero past its third word", "data.format"});
  write_file(path, llmc_bytes(0, 0, 0, kTokens));  // the header wiped
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65536); }, {path, "unknown magic 0"});
  // Raw tokens that are not zero there read as raw, as before; so do padded ones, pad id 0 (their
  // third pair of tokens is no version word).
  std::vector<std::uint16_t> raw(600, 5);
  write_file(path, raw_bytes(raw));
  EXPECT_EQ(TokenFile::open(path, TokenFileFormat::kAuto, 65).format(), TokenFileFormat::kNanoGpt);
  std::vector<std::uint16_t> padded = {5, 6, 7, 8, 9, 10};
  padded.resize(600, 0);
  write_file(path, raw_bytes(padded));
  EXPECT_EQ(TokenFile::open(path, TokenFileFormat::kAuto, 65).format(), TokenFileFormat::kNanoGpt);
}

// data.format "nanogpt" on a whole llm.c token file: refused (its header read as 512 tokens, and a
// resume that changed the format would have shifted every window without a word).
TEST(TokenFile, RawFormatRefusesAWholeLlmcFile) {
  const std::string path = temp_path("llmc_as_raw.bin");
  write_llmc_token_file(path, kTokens);
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kNanoGpt, 65536); },
                     {path, "an llm.c token file (magic 20240520, 8 tokens)", "data.format \"auto\""});
}

// llm.c's multiple-choice and model files, given as token files: named for what they are (read as
// raw tokens, a choice file scored its header and numbers, exit 0, under a vocabulary past 55434).
// Their counts do not fit the token-file rule, so they passed for raw tokens before.
TEST(TokenFile, AutoNamesLlmcsChoiceAndModelFiles) {
  const std::string path = temp_path("choices_as_tokens.bin");
  write_file(path, llmc_bytes(20240522, 1, 5, kTokens));
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65536); },
                     {path, "magic 20240522 is llm.c's multiple-choice eval file", "--choices"});
  write_file(path, llmc_bytes(20240326, 3, 5, kTokens));
  expect_input_error([&] { TokenFile::open(path, TokenFileFormat::kAuto, 65536); },
                     {path, "magic 20240326 is llm.c's model file", "--from"});
}

}  // namespace
}  // namespace zt::data
