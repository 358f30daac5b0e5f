// Sharded corpora (engine/app/data/token_corpus.h): patterns expand to sorted files, a split keeps
// one format, random windows over one shard are the single file's, random windows cover every
// start of every shard and never cross into the next, sequential order walks the shards reading
// each token once an epoch, batches are the same whichever ranks read them, tokens are checked as
// they are read, and every bad shard is refused naming its file.
#include "engine/app/data/token_corpus.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "engine/app/data/batch_sampler.h"
#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::expect_input_error;
using testing::temp_path;
using testing::write_file;

// A fresh folder for one test's shards.
std::string fresh_dir(const std::string& name) {
  const std::string dir = temp_path("corpus_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Shard s holds n tokens numbered s * 1000 + i (mod vocab 65536 never reached here), so a token
// says where it came from.
std::vector<std::uint16_t> numbered(int shard, int n) {
  std::vector<std::uint16_t> t(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>(shard * 1000 + i);
  return t;
}

std::string llmc32_bytes(const std::vector<std::uint32_t>& tokens) {
  std::string bytes(static_cast<std::size_t>(kLlmcHeaderBytes) + 4 * tokens.size(), '\0');
  const std::int32_t fields[3] = {kLlmcToken32Magic, kLlmcToken32Version, static_cast<std::int32_t>(tokens.size())};
  std::memcpy(bytes.data(), fields, sizeof(fields));
  std::memcpy(bytes.data() + kLlmcHeaderBytes, tokens.data(), 4 * tokens.size());
  return bytes;
}

// Three llm.c shards of 50, 9 and 80 tokens, written as train_000.bin .. train_002.bin.
std::string three_shards(const std::string& name) {
  const std::string dir = fresh_dir(name);
  const int sizes[3] = {50, 9, 80};
  for (int s = 0; s < 3; ++s)
    write_llmc_token_file(dir + "/train_00" + std::to_string(s) + ".bin", numbered(s, sizes[s]));
  return dir;
}

TokenCorpus open_three(const std::string& dir) {
  return TokenCorpus::open_shards({dir + "/train_*.bin"}, TokenFileFormat::kAuto, 4000, "data.train_files");
}

TEST(TokenCorpus, PatternsExpandToSortedShardsAndDescribeThem) {
  const std::string dir = three_shards("expand");
  const TokenCorpus c = open_three(dir);
  ASSERT_EQ(c.shard_count(), 3);
  EXPECT_EQ(c.shard_name(0), dir + "/train_000.bin");
  EXPECT_EQ(c.shard_name(2), dir + "/train_002.bin");
  EXPECT_EQ(c.token_count(), 139);
  EXPECT_TRUE(c.checks_on_read());
  EXPECT_EQ(c.describe(), "3 shards (llm.c uint16), 139 tokens");
  // A list of plain paths keeps its own order.
  const TokenCorpus listed = TokenCorpus::open_shards({dir + "/train_002.bin", dir + "/train_000.bin"},
                                                      TokenFileFormat::kAuto, 4000, "data.train_files");
  EXPECT_EQ(listed.shard_name(0), dir + "/train_002.bin");
}

TEST(TokenCorpus, RandomWindowsOverOneShardAreTheSingleFilesDraw) {
  const std::vector<std::uint16_t> tokens = numbered(0, 700);
  const TokenCorpus c{TokenSpan(tokens)};
  for (std::int64_t g = 0; g < 200; ++g) {
    const WindowPlace w = c.place(SampleOrder::kRandom, 42, kTrainStream, g, 16);
    EXPECT_EQ(w.shard, 0);
    EXPECT_EQ(w.start, sample_window_start(42, kTrainStream, g, 700, 16)) << g;
  }
}

TEST(TokenCorpus, RandomWindowsCoverEveryStartAndStayInsideTheirShard) {
  const TokenCorpus c = open_three(three_shards("random"));
  const int T = 8;
  // Starts: 50 - 8 = 42, 9 - 8 = 1, 80 - 8 = 72.
  ASSERT_EQ(c.window_count(SampleOrder::kRandom, T), 42 + 1 + 72);
  std::map<std::pair<int, std::int64_t>, int> hits;
  std::vector<std::int32_t> in(T), tg(T);
  for (std::int64_t g = 0; g < 20000; ++g) {
    const WindowPlace w = c.place(SampleOrder::kRandom, 7, kTrainStream, g, T);
    ASSERT_LE(w.start + T + 1, c.shard_tokens(w.shard).size());
    ++hits[{w.shard, w.start}];
    if (g < 300) {
      c.read_window(w, T, in.data(), tg.data());
      for (int t = 0; t < T; ++t) {
        ASSERT_EQ(in[t], w.shard * 1000 + w.start + t);
        ASSERT_EQ(tg[t], in[t] + 1) << "targets are the next tokens of the same shard";
      }
    }
  }
  EXPECT_EQ(hits.size(), 115u) << "every start of every shard is drawn";
  EXPECT_TRUE(hits.count({1, 0})) << "the 9-token shard's one window";
}

TEST(TokenCorpus, SequentialOrderReadsEachTokenOnceAnEpochInShardOrder) {
  const TokenCorpus c = open_three(three_shards("sequential"));
  const int T = 8;
  // Windows per shard: (50 - 1) / 8 = 6, (9 - 1) / 8 = 1, (80 - 1) / 8 = 9.
  const std::int64_t W = c.window_count(SampleOrder::kSequential, T);
  ASSERT_EQ(W, 16);
  std::vector<WindowPlace> epoch;
  for (std::int64_t g = 0; g < W; ++g) epoch.push_back(c.place(SampleOrder::kSequential, 1, kTrainStream, g, T));
  EXPECT_EQ(epoch[0].shard, 0);
  EXPECT_EQ(epoch[5].start, 40);
  EXPECT_EQ(epoch[6].shard, 1);
  EXPECT_EQ(epoch[7].shard, 2);
  EXPECT_EQ(epoch[15].start, 64);
  std::map<int, std::int64_t> next;  // the next unread input position per shard
  for (const WindowPlace& w : epoch) {
    EXPECT_EQ(w.start, next[w.shard]) << "windows follow each other without gap or overlap";
    next[w.shard] = w.start + T;
  }
  const WindowPlace again = c.place(SampleOrder::kSequential, 99, kValStream, W + 3, T);
  EXPECT_EQ(again.shard, epoch[3].shard);
  EXPECT_EQ(again.start, epoch[3].start) << "the next epoch walks the same way, whatever the seed and stream";
}

TEST(TokenCorpus, ABatchIsTheSameWhicheverRanksReadIt) {
  const TokenCorpus c = open_three(three_shards("ranks"));
  const int B = 4, T = 8;
  for (const SampleOrder order : {SampleOrder::kRandom, SampleOrder::kSequential}) {
    const SampleStream how{order, 5, kTrainStream};
    // One process with micro-batch 4 x 3 against three ranks with 4 each, at step 7.
    std::vector<std::int32_t> whole(3 * B * T), whole_t(3 * B * T);
    fill_batch(c, how, 3 * B, T, first_sample_index(7, 0, 1, 3 * B, 1, 0), whole.data(), whole_t.data());
    for (int r = 0; r < 3; ++r) {
      std::vector<std::int32_t> in(B * T), tg(B * T);
      fill_batch(c, how, B, T, first_sample_index(7, 0, 1, B, 3, r), in.data(), tg.data());
      EXPECT_TRUE(std::equal(in.begin(), in.end(), whole.begin() + r * B * T)) << "rank " << r;
    }
  }
}

TEST(TokenCorpus, ATokenOverTheVocabularyIsFoundWhenReadNamingItsShard) {
  const std::string dir = fresh_dir("bad_token");
  std::vector<std::uint16_t> bad = numbered(0, 40);
  bad[25] = 3999;
  write_llmc_token_file(dir + "/train_000.bin", numbered(0, 40));
  write_llmc_token_file(dir + "/train_001.bin", bad);
  // Opening reads headers only: the bad token is not seen yet.
  const TokenCorpus c = TokenCorpus::open_shards({dir + "/train_*.bin"}, TokenFileFormat::kAuto, 100, "k");
  const int T = 8;
  std::vector<std::int32_t> in(T), tg(T);
  c.read_window({1, 0}, T, in.data(), tg.data());  // tokens 0..8 of the bad shard are fine
  expect_input_error(
      [&] {
        c.read_window({1, 20}, T, in.data(), tg.data());
      },
      {dir + "/train_001.bin", "token 3999 at position 25", "vocabulary (size 100)"});
  // Tokens 17..25: the bad token only as the window's last target, which no input reads.
  expect_input_error(
      [&] {
        c.read_window({1, 17}, T, in.data(), tg.data());
      },
      {dir + "/train_001.bin", "token 3999 at position 25"});
  expect_input_error(
      [&] {
        check_samples(c, {SampleOrder::kSequential, 0, kTrainStream}, T, 0, 8);
      },
      {"train_001.bin", "3999"});
  expect_input_error([&] { (void)c.token_counts(100, 1 << 20); }, {"train_001.bin", "position 25"});
}

TEST(TokenCorpus, BadShardsAreRefusedNamingTheFileOrPattern) {
  const std::string dir = fresh_dir("bad_shards");
  write_llmc_token_file(dir + "/a_000.bin", numbered(0, 20));
  const auto open = [&](std::vector<std::string> patterns) {
    (void)TokenCorpus::open_shards(patterns, TokenFileFormat::kAuto, 4000, "data.train_files");
  };
  expect_input_error([&] { open({dir + "/none_*.bin"}); }, {"data.train_files", "none_*.bin", "matches no file"});
  expect_input_error([&] { open({dir + "/missing.bin"}); }, {dir + "/missing.bin", "cannot open"});
  expect_input_error([&] { open({dir + "/a_*.bin", dir + "/a_000.bin"}); }, {"a_000.bin", "listed twice"});
  write_file(dir + "/empty.bin", "");
  expect_input_error([&] { open({dir + "/a_000.bin", dir + "/empty.bin"}); }, {dir + "/empty.bin", "empty"});
  std::string truncated = testing::read_file(dir + "/a_000.bin");
  truncated.resize(truncated.size() - 6);
  write_file(dir + "/truncated.bin", truncated);
  expect_input_error([&] { open({dir + "/truncated.bin"}); }, {dir + "/truncated.bin", "header's token count"});
  std::string magic = testing::read_file(dir + "/a_000.bin");
  magic[0] = 0x11;
  write_file(dir + "/magic.bin", magic);
  expect_input_error([&] { open({dir + "/magic.bin"}); }, {dir + "/magic.bin", "magic"});
  write_file(dir + "/wide.bin", llmc32_bytes({1, 2, 3, 4, 5}));
  expect_input_error(
      [&] {
        open({dir + "/a_000.bin", dir + "/wide.bin"});
      },
      {dir + "/wide.bin", "llm.c uint32", "a_000.bin", "llm.c uint16", "one format per split"});
}

// A file whose name holds a wildcard character is read as named, not as the pattern glob would
// make of it ("[1]" a class matching "1"); where that pattern also matches other files, refused.
TEST(TokenCorpus, AnExistingFileWithWildcardCharactersIsReadAsNamed) {
  const std::string dir = fresh_dir("literal_brackets");
  write_llmc_token_file(dir + "/tr[1].bin", numbered(0, 40));
  EXPECT_EQ(expand_pattern(dir + "/tr[1].bin", "data.train_files"), std::vector<std::string>{dir + "/tr[1].bin"});
  write_llmc_token_file(dir + "/tr1.bin", numbered(0, 20));
  expect_input_error([&] { (void)expand_pattern(dir + "/tr[1].bin", "data.train_files"); },
                     {"data.train_files", "tr[1].bin' names a file", "1 other file(s)", "tr1.bin", "backslash"});
  // Escaped, the pattern means the file; unescaped without the literal file, the glob.
  EXPECT_EQ(expand_pattern(dir + "/tr\\[1\\].bin", "k"), std::vector<std::string>{dir + "/tr[1].bin"});
  EXPECT_EQ(expand_pattern(dir + "/tr[1-1].bin", "k"), std::vector<std::string>{dir + "/tr1.bin"});
  // "v*.bin" matches the file itself: nothing else, so nothing ambiguous (it was refused as
  // matching "1 other file", itself).
  write_llmc_token_file(dir + "/v*.bin", numbered(0, 40));
  write_llmc_token_file(dir + "/w?.bin", numbered(0, 40));
  EXPECT_EQ(expand_pattern(dir + "/v*.bin", "k"), std::vector<std::string>{dir + "/v*.bin"});
  EXPECT_EQ(expand_pattern(dir + "/w?.bin", "k"), std::vector<std::string>{dir + "/w?.bin"});
  write_llmc_token_file(dir + "/va.bin", numbered(0, 40));
  expect_input_error([&] { (void)expand_pattern(dir + "/v*.bin", "k"); },
                     {"v*.bin' names a file", "1 other file(s)", "va.bin", "\\*"});
}

TEST(TokenCorpus, TokenCountsSampleALargeCorpusInBlocks) {
  const std::string dir = three_shards("counts");
  const TokenCorpus c = open_three(dir);
  const std::vector<std::int64_t> all = c.token_counts(4000, 1000);
  std::int64_t n = 0;
  for (std::int64_t k : all) n += k;
  EXPECT_EQ(n, 139) << "under the cap: every token";
  EXPECT_EQ(all[2005], 1);
  const std::vector<std::int64_t> sampled = c.token_counts(4000, 64);  // 64 blocks of one token
  n = 0;
  for (std::int64_t k : sampled) n += k;
  EXPECT_EQ(n, 64);
  EXPECT_EQ(sampled[0], 1) << "block 0 starts at the corpus' first token";
}

}  // namespace
}  // namespace zt::data
