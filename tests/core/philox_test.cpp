// Philox4x32-10 against the Random123 library's published known-answer vectors (the
// "philox4x32 10" lines of tests/kat_vectors in DEShawResearch/random123). Parameter
// initialisation, dropout masks and the data order all draw from it, so a slip in a multiplier,
// a Weyl constant or the word order would change every run without failing a test that compares
// the engine with itself.
#include "engine/base/core/philox.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

namespace zt {
namespace {

struct KnownAnswer {
  std::array<std::uint32_t, 4> counter;
  std::array<std::uint32_t, 2> key;
  std::array<std::uint32_t, 4> output;
};

TEST(Philox4x32, MatchesTheRandom123KnownAnswers) {
  const KnownAnswer answers[] = {
      {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u},
       {0x00000000u, 0x00000000u},
       {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const KnownAnswer& a : answers) {
    EXPECT_EQ(philox4x32(a.counter, a.key), a.output) << "counter word 0 " << std::hex << a.counter[0];
  }
}

}  // namespace
}  // namespace zt
