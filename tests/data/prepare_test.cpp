// prepare: a text becomes vocab.json + train.bin + val.bin whose decoded concatenation is the
// original text, split 90/10 by position; on tiny shakespeare the figures match nanoGPT's.
#include "engine/app/data/prepare.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "engine/app/data/token_file.h"
#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::expect_input_error;
using testing::temp_path;
using testing::write_file;

// Decodes train.bin followed by val.bin with the saved vocabulary.
std::string decode_split(const std::string& dir, const Vocab& vocab) {
  std::vector<std::int32_t> ids;
  for (const char* name : {"train.bin", "val.bin"}) {
    const TokenFile f = TokenFile::open(dir + "/" + name, TokenFileFormat::kLlmc, vocab.size());
    ids.insert(ids.end(), f.tokens().begin(), f.tokens().end());
  }
  return vocab.decode(ids);
}

TEST(Prepare, CharLevelSplitsNinetyTenAndDecodesBackToTheText) {
  const std::string text_path = temp_path("prepare_in.txt"), dir = temp_path("prepare_out/nested");
  std::filesystem::remove_all(temp_path("prepare_out"));
  std::string text;
  for (int i = 0; i < 20; ++i) text += "to be or not to be, \xC3\xA9t\xC3\xA9 " + std::to_string(i) + "\n";
  write_file(text_path, text);
  const Vocab probe = Vocab::build_char(text);
  const auto n = static_cast<std::int64_t>(probe.encode(text).size());

  const PrepareSummary s = prepare_text_dataset(text_path, dir, Vocab::Kind::kChar);
  EXPECT_EQ(s.vocab_size, probe.size());
  EXPECT_EQ(s.train_tokens, n * 9 / 10);
  EXPECT_EQ(s.train_tokens + s.val_tokens, n);
  EXPECT_EQ(std::filesystem::file_size(dir + "/train.bin"), static_cast<std::uintmax_t>(1024 + 2 * s.train_tokens));
  EXPECT_EQ(std::filesystem::file_size(dir + "/val.bin"), static_cast<std::uintmax_t>(1024 + 2 * s.val_tokens));
  const Vocab vocab = Vocab::load(dir + "/vocab.json");
  EXPECT_EQ(vocab.size(), s.vocab_size);
  EXPECT_EQ(decode_split(dir, vocab), text);
}

TEST(Prepare, ByteLevelKeepsEveryByte) {
  const std::string text_path = temp_path("prepare_bytes.txt"), dir = temp_path("prepare_bytes_out");
  std::string text = "caf\xC3\xA9 au lait\n";
  text += text + text + std::string(1, '\xFF');  // byte level accepts bytes that are not UTF-8
  write_file(text_path, text);
  const PrepareSummary s = prepare_text_dataset(text_path, dir, Vocab::Kind::kByte, 0.25);
  EXPECT_EQ(s.vocab_size, 256);
  EXPECT_EQ(s.train_tokens + s.val_tokens, static_cast<std::int64_t>(text.size()));
  EXPECT_EQ(s.train_tokens, static_cast<std::int64_t>(text.size() * 3 / 4));
  EXPECT_EQ(decode_split(dir, Vocab::load(dir + "/vocab.json")), text);
}

TEST(Prepare, RefusesBadInputs) {
  const std::string dir = temp_path("prepare_bad_out");
  const std::string missing = temp_path("prepare_missing.txt");
  expect_input_error([&] { prepare_text_dataset(missing, dir, Vocab::Kind::kChar); }, {missing, "cannot open"});
  const std::string empty = temp_path("prepare_empty.txt");
  write_file(empty, "");
  expect_input_error([&] { prepare_text_dataset(empty, dir, Vocab::Kind::kChar); }, {empty, "empty"});
  const std::string short_text = temp_path("prepare_short.txt");
  write_file(short_text, "abcdefghij");  // 9 train tokens, 1 validation token: the fraction's fault
  expect_input_error([&] { prepare_text_dataset(short_text, dir, Vocab::Kind::kChar); },
                     {short_text, "validation fraction 0.1", "1 validation", "0.2 or more"});
  const std::string tiny_text = temp_path("prepare_tiny.txt");
  write_file(tiny_text, "abc");  // no fraction splits 3 tokens 2 and 2
  expect_input_error([&] { prepare_text_dataset(tiny_text, dir, Vocab::Kind::kChar, 0.5); },
                     {tiny_text, "text too short"});
  // Where a write or rename would fail only after the work: said first, naming the path.
  const std::string blocked = temp_path("prepare_blocked_out");
  std::filesystem::create_directories(blocked + "/val.bin");
  write_file(short_text, "abcdefghijabcdefghij");
  expect_input_error([&] { prepare_text_dataset(short_text, blocked, Vocab::Kind::kChar); },
                     {blocked + "/val.bin", "is a directory"});
  EXPECT_FALSE(std::filesystem::exists(blocked + "/train.bin")) << "nothing written";
  // A training run's directory: its vocab.json is the run's (its samples and exports decode
  // through it), with no token files beside it, so not an earlier prepare's.
  for (const char* run_file : {"metrics.jsonl", "RUN_LOCK", "checkpoints", "final.safetensors"}) {
    const std::string run_dir = temp_path("prepare_into_run");
    std::filesystem::remove_all(run_dir);
    std::filesystem::create_directories(run_dir);
    write_file(run_dir + "/vocab.json", "the run's vocabulary");
    if (std::string(run_file) == "checkpoints") {
      std::filesystem::create_directories(run_dir + "/checkpoints");
    } else {
      write_file(run_dir + "/" + run_file, "");
    }
    expect_input_error([&] { prepare_text_dataset(short_text, run_dir, Vocab::Kind::kChar); },
                       {run_dir, "is a training run's directory", run_file});
    EXPECT_FALSE(std::filesystem::exists(run_dir + "/train.bin")) << run_file;
  }
  const std::string bad_utf8 = temp_path("prepare_bad_utf8.txt");
  write_file(bad_utf8, "hello \xFE world, long enough to split");
  expect_input_error([&] { prepare_text_dataset(bad_utf8, dir, Vocab::Kind::kChar); },
                     {bad_utf8, "invalid UTF-8", "byte offset 6", "--level byte tokenises any bytes"});
}

// nanoGPT's data/shakespeare_char/prepare.py reports 65 characters, 1,003,854 train and 111,540
// validation tokens for this file.
TEST(Prepare, TinyShakespeareMatchesNanoGptFigures) {
  const std::string corpus = ZT_SHARED_DIR "/data/tinyshakespeare.txt";  // ../shared beside the checkout
  if (!std::filesystem::exists(corpus)) GTEST_SKIP() << corpus << " is not present on this machine";
  const std::string dir = temp_path("prepare_shakespeare");
  const PrepareSummary s = prepare_text_dataset(corpus, dir, Vocab::Kind::kChar);
  EXPECT_EQ(s.vocab_size, 65);
  EXPECT_EQ(s.train_tokens, 1003854);
  EXPECT_EQ(s.val_tokens, 111540);
  const Vocab vocab = Vocab::load(dir + "/vocab.json");
  EXPECT_EQ(vocab.decode(std::vector<std::int32_t>{0, 1, 2, 13, 39, 64}), "\n !Aaz");
}

}  // namespace
}  // namespace zt::data
