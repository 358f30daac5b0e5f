// The embedded dataset: a pure function of (seed, n_chars), whole lines of ASCII no longer than
// asked, fewer than 64 distinct characters; prints its unigram entropy (the loss floor of a
// model that ignores context) so a run's loss can be compared with it.
#include "engine/app/data/embedded_dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "engine/app/data/batch_sampler.h"
#include "engine/app/data/vocab.h"

namespace zt::data {
namespace {

TEST(EmbeddedDataset, SameSeedGivesSameTextAndDifferentSeedsDiffer) {
  const std::string a = generate_embedded_text(1234, 50000);
  EXPECT_EQ(a, generate_embedded_text(1234, 50000));
  EXPECT_NE(a, generate_embedded_text(1235, 50000));
  // Generation is sequential, so a shorter request is a prefix of a longer one.
  const std::string shorter = generate_embedded_text(1234, 20000);
  EXPECT_EQ(a.substr(0, shorter.size()), shorter);
}

// The text is pinned: it must not change with the compiler, the standard library or the platform
// (the generator uses its own splitmix64 and one draw per statement). Changing the grammar on
// purpose means updating these golden values.
TEST(EmbeddedDataset, MatchesGoldenText) {
  const std::string text = generate_embedded_text(1337, 200);
  EXPECT_EQ(text,
            "the tired farmer sells meat.\n"
            "the lazy fox eats meat. then it chases the bird.\n"
            "the baker feeds the fox eggs. she bakes bread.\n"
            "count: 0 1 2 3 4 5.\n"
            "count: 8 9 10 11 12.\n"
            "8 minus 5 is 3.\n");
  std::uint64_t fnv1a = 0xCBF29CE484222325ull;
  for (char c : generate_embedded_text(1337, 1000000))
    fnv1a = (fnv1a ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  EXPECT_EQ(fnv1a, 0xC32A1094257AA79Eull) << std::hex << fnv1a;
}

TEST(EmbeddedDataset, IsWholeAsciiLinesOfAboutTheRequestedLength) {
  for (std::int64_t n : {1000, 100000, 1000000}) {
    const std::string text = generate_embedded_text(7, n);
    EXPECT_LE(static_cast<std::int64_t>(text.size()), n);
    EXPECT_GE(static_cast<std::int64_t>(text.size()), n - 200) << "cut at the last newline, lines are short";
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.back(), '\n');
    for (char c : text) ASSERT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7F)) << "not printable ASCII: " << int(c);
  }
  EXPECT_EQ(generate_embedded_text(7, 0), "");
  // At every length of a range (wherever a newline falls against the cut), never a character over.
  for (std::int64_t n = 1000; n < 1300; ++n) {
    ASSERT_LE(static_cast<std::int64_t>(generate_embedded_text(1, n).size()), n) << n;
  }
}

TEST(EmbeddedDataset, UsesFewerThan64CharactersAndHasStructure) {
  const std::string text = generate_embedded_text(1337, 1000000);
  const std::set<char> distinct(text.begin(), text.end());
  EXPECT_LT(distinct.size(), 64u);
  const Vocab vocab = Vocab::build_char(text);
  const std::vector<std::uint16_t> tokens = vocab.encode(text);
  const double h = unigram_entropy_nats(tokens, vocab.size());
  std::printf("embedded text: %zu chars, %d distinct, unigram entropy %.4f nats (ln V = %.4f)\n", text.size(),
              vocab.size(), h, std::log(static_cast<double>(vocab.size())));
  std::printf("sample:\n%s\n", text.substr(0, 600).c_str());
  EXPECT_GT(h, 2.0);
  EXPECT_LT(h, std::log(static_cast<double>(vocab.size())));
  // Facts of the world hold wherever they are stated: foxes always eat meat and eggs.
  EXPECT_NE(text.find("what do foxes eat? foxes eat meat and eggs."), std::string::npos);
  EXPECT_EQ(text.find("foxes eat grass"), std::string::npos);
}

}  // namespace
}  // namespace zt::data
