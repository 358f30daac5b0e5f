// llm.c's multiple-choice eval files (engine/app/data/choice_file.h): a file written word by word
// as llm.c's write_evalfile lays it out reads back example by example, and each kind of damage
// (magic, version, count, start mark, byte count, label, empty parts, a token over the vocabulary,
// truncation, trailing bytes, the header's longest example) is refused in one line naming the file, the example and the
// fault.
#include <gtest/gtest.h>

#include <filesystem>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/app/data/choice_file.h"
#include "tests/data/data_test_util.h"

namespace zt::data {
namespace {

using testing::expect_input_error;
using testing::temp_path;
using testing::write_file;

struct Example {
  int label;
  std::vector<std::uint16_t> context;
  std::vector<std::vector<std::uint16_t>> completions;
};

std::vector<std::uint16_t> example_words(const Example& x, int index) {
  std::vector<std::uint16_t> w = {65535,
                                  0,
                                  static_cast<std::uint16_t>(index),
                                  static_cast<std::uint16_t>(x.label),
                                  static_cast<std::uint16_t>(x.completions.size()),
                                  static_cast<std::uint16_t>(x.context.size())};
  w.insert(w.end(), x.context.begin(), x.context.end());
  for (const auto& c : x.completions) {
    w.push_back(static_cast<std::uint16_t>(c.size()));
    w.insert(w.end(), c.begin(), c.end());
  }
  w[1] = static_cast<std::uint16_t>(2 * w.size());
  return w;
}

// `longest`: the header's longest example in bytes; -1 for the examples' own, as llm.c writes it.
std::string file_bytes(std::int32_t magic, std::int32_t version, std::int32_t count,
                       const std::vector<std::uint16_t>& words, std::int32_t longest = -1) {
  if (longest < 0) {
    longest = 0;
    for (std::size_t i = 0; i + 1 < words.size(); i += std::max<std::size_t>(1, words[i + 1] / 2)) {
      if (words[i] != 65535) break;  // a damaged mark: the reader stops there
      longest = std::max<std::int32_t>(longest, words[i + 1]);
    }
  }
  std::vector<std::int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  header[3] = longest;
  std::string bytes(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  bytes.append(reinterpret_cast<const char*>(words.data()), words.size() * 2);
  return bytes;
}

const std::vector<Example> kExamples = {
    {2, {5, 6, 7}, {{1}, {2, 3}, {4, 4, 4}, {9}}},
    {0, {8}, {{3, 3}, {1}}},
};

std::vector<std::uint16_t> all_words() {
  std::vector<std::uint16_t> w;
  for (std::size_t i = 0; i < kExamples.size(); ++i) {
    const auto e = example_words(kExamples[i], static_cast<int>(i));
    w.insert(w.end(), e.begin(), e.end());
  }
  return w;
}

std::string write(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  write_file(path, bytes);
  return path;
}

TEST(ChoiceFile, ReadsLlmcsLayoutExampleByExample) {
  const std::string path = write("choices.bin", file_bytes(20240522, 1, 2, all_words()));
  const ChoiceFile f = ChoiceFile::load(path, 10);
  ASSERT_EQ(f.examples().size(), 2u);
  EXPECT_EQ(f.rows(), 6);
  EXPECT_EQ(f.longest_input(), 5);  // 3 context tokens and 3 completion tokens, the last only predicted
  const ChoiceExample& x = f.examples()[0];
  EXPECT_EQ(x.label, 2);
  EXPECT_EQ(x.context, (std::vector<std::int32_t>{5, 6, 7}));
  ASSERT_EQ(x.completions.size(), 4u);
  EXPECT_EQ(x.completions[1], (std::vector<std::int32_t>{2, 3}));
  EXPECT_EQ(f.examples()[1].completions[0], (std::vector<std::int32_t>{3, 3}));
}

TEST(ChoiceFile, RefusesEachKindOfDamageInOneLine) {
  const std::vector<std::uint16_t> good = all_words();
  expect_input_error([&] { ChoiceFile::load(temp_path("none.bin"), 10); }, {"none.bin", "no such"});
  const std::string folder = temp_path("choices_folder");
  std::filesystem::create_directories(folder);
  expect_input_error([&] { ChoiceFile::load(folder, 10); }, {"choices_folder", "is a directory"});
  // A regular file whose read fails (EIO): named with the error, as every other reader says it.
  expect_input_error([&] { ChoiceFile::load("/proc/self/mem", 10); }, {"/proc/self/mem", "read failed"});
  expect_input_error([&] { ChoiceFile::load(write("short.bin", "abc"), 10); }, {"short.bin", "header"});
  expect_input_error([&] { ChoiceFile::load(write("magic.bin", file_bytes(20240520, 1, 2, good)), 10); },
                     {"magic.bin", "magic 20240520"});
  expect_input_error([&] { ChoiceFile::load(write("version.bin", file_bytes(20240522, 2, 2, good)), 10); },
                     {"version.bin", "version 2"});
  expect_input_error([&] { ChoiceFile::load(write("count0.bin", file_bytes(20240522, 1, 0, good)), 10); },
                     {"count0.bin", "0 examples"});
  expect_input_error([&] { ChoiceFile::load(write("vocab.bin", file_bytes(20240522, 1, 2, good)), 9); },
                     {"vocab.bin", "example 0", "token 9", "vocabulary (9)"});
  expect_input_error([&] { ChoiceFile::load(write("more.bin", file_bytes(20240522, 1, 3, good)), 10); },
                     {"more.bin", "example 2", "ends"});
  expect_input_error([&] { ChoiceFile::load(write("fewer.bin", file_bytes(20240522, 1, 1, good)), 10); },
                     {"fewer.bin", "after its 1 examples"});
  // The header's longest example shorter than one of the file's (llm.c sizes its buffer by it); a
  // larger figure reads.
  expect_input_error([&] { ChoiceFile::load(write("longest.bin", file_bytes(20240522, 1, 2, good, 10)), 10); },
                     {"longest.bin", "longest example is 10 bytes, but one is 40"});
  EXPECT_EQ(ChoiceFile::load(write("larger.bin", file_bytes(20240522, 1, 2, good, 4000)), 10).examples().size(), 2u);
  std::vector<std::uint16_t> cut(good.begin(), good.end() - 1);
  expect_input_error([&] { ChoiceFile::load(write("cut.bin", file_bytes(20240522, 1, 2, cut)), 10); },
                     {"cut.bin", "example 1", "truncated"});

  auto damaged = [&](std::size_t at, std::uint16_t value) {
    std::vector<std::uint16_t> w = good;
    w[at] = value;
    return file_bytes(20240522, 1, 2, w);
  };
  expect_input_error([&] { ChoiceFile::load(write("mark.bin", damaged(0, 7)), 10); },
                     {"mark.bin", "example 0", "65535"});
  expect_input_error([&] { ChoiceFile::load(write("bytes.bin", damaged(1, 42)), 10); },
                     {"bytes.bin", "example 0", "says it is 42 bytes but holds 40"});
  expect_input_error([&] { ChoiceFile::load(write("label.bin", damaged(3, 4)), 10); },
                     {"label.bin", "example 0", "label 4", "4 completions"});
  expect_input_error([&] { ChoiceFile::load(write("ncomp.bin", damaged(4, 1)), 10); },
                     {"ncomp.bin", "example 0", "1 completion"});
  // A context length past the example's bytes: named as such (it read on into example 1, and the
  // error named its start mark, 65535, as a token past the vocabulary).
  expect_input_error([&] { ChoiceFile::load(write("context_len.bin", damaged(5, 5000)), 10); },
                     {"context_len.bin", "example 0", "context of 5000 tokens runs past the 40 bytes"});
  // A byte count smaller than the example: its last completion runs past it (one or the other is
  // damaged; the message says so).
  expect_input_error([&] { ChoiceFile::load(write("bytes_short.bin", damaged(1, 38)), 10); },
                     {"bytes_short.bin", "example 0", "runs past the 38 bytes", "a damaged length or byte count"});
  // llm.c's reader asserts the examples' indices (0, 1, ...): one out of order was scored.
  expect_input_error([&] { ChoiceFile::load(write("index.bin", damaged(2, 7)), 10); },
                     {"index.bin", "example 0 carries the index 7"});
  // Example 0's first completion is one token: its length word sits after the 6 header words and
  // 3 context tokens.
  std::vector<std::uint16_t> empty = good;
  empty[9] = 0;
  empty.erase(empty.begin() + 10);
  empty[1] = static_cast<std::uint16_t>(empty[1] - 2);
  expect_input_error([&] { ChoiceFile::load(write("empty.bin", file_bytes(20240522, 1, 2, empty)), 10); },
                     {"empty.bin", "example 0", "completion has no tokens"});
}

}  // namespace
}  // namespace zt::data
