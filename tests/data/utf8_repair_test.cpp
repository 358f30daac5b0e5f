// Utf8Repair (engine/app/data/utf8.h): decoded bytes made valid UTF-8 as they come, each maximal
// invalid part one U+FFFD, the same text whether fed whole or a byte at a time, and the same as the
// metrics log's JSON writer (nlohmann's error_handler_t::replace) makes of the bytes, on fresh
// random byte strings.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/app/data/utf8.h"

namespace zt::data {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// What the metrics log writes of `bytes`, read back.
std::string as_logged(const std::string& bytes) {
  return nlohmann::json::parse(nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

TEST(Utf8Repair, ValidTextPassesAndACharacterSplitAcrossTokensWaitsForItsBytes) {
  EXPECT_EQ(repaired_utf8("plain, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80"),
            "plain, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80");
  Utf8Repair r;
  EXPECT_EQ(r.feed("caf\xC3"), "caf");  // the first byte of an e acute, held
  EXPECT_EQ(r.feed("\xA9!"), "\xC3\xA9!");
  EXPECT_EQ(r.feed("\xF0\x9F"), "");
  EXPECT_EQ(r.feed("\x98"), "");
  EXPECT_EQ(r.feed("\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(r.finish(), "");
}

TEST(Utf8Repair, EachMaximalInvalidPartIsOneReplacement) {
  EXPECT_EQ(repaired_utf8("FWhat\xA8\x61\x64"), "FWhat" + kFffd + "ad");        // a lone continuation byte, then "ad"
  EXPECT_EQ(repaired_utf8("a\xC3"), "a" + kFffd);                               // cut at the end
  EXPECT_EQ(repaired_utf8("\xE2\x82\x78"), kFffd + "x");                        // two of three bytes, then "x"
  EXPECT_EQ(repaired_utf8("\xE2\x82\xC3\xA9"), kFffd + "\xC3\xA9");             // the breaking byte starts afresh
  EXPECT_EQ(repaired_utf8("\xC0\xAF"), kFffd + kFffd);                          // overlong: neither byte starts one
  EXPECT_EQ(repaired_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // a surrogate
  EXPECT_EQ(repaired_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // past U+10FFFF
  EXPECT_EQ(repaired_utf8("\xFF"), kFffd);
}

TEST(Utf8Repair, RandomBytesAsTheMetricsLogWritesThemFedWholeOrInPieces) {
  std::mt19937 rng(std::random_device{}());
  // Bytes weighted toward the interesting ones: ASCII, continuations, and every kind of lead.
  const unsigned char pool[] = {'a',  ' ',  0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2,
                                0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF3, 0xF4, 0xF5, 0xFF};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) bytes += static_cast<char>(pool[rng() % sizeof(pool)]);
    const std::string whole = repaired_utf8(bytes);
    EXPECT_EQ(whole, as_logged(bytes)) << ::testing::PrintToString(bytes);
    Utf8Repair r;
    std::string pieces;
    for (std::size_t at = 0; at < bytes.size();) {
      const std::size_t len = std::min<std::size_t>(bytes.size() - at, 1 + rng() % 3);
      pieces += r.feed(std::string_view(bytes).substr(at, len));
      at += len;
    }
    pieces += r.finish();
    EXPECT_EQ(pieces, whole) << ::testing::PrintToString(bytes);
  }
}

}  // namespace
}  // namespace zt::data
