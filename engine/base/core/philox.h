// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011): the value at a position is a
// pure function of (key, counter), so initialisation and dropout masks do not depend on the
// order of generation, the number of threads or ranks, or on where a run was resumed.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace zt {

inline std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> ctr, std::array<std::uint32_t, 2> key) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * ctr[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * ctr[2];
    ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<std::uint32_t>(p0)};
    key[0] += kW0;
    key[1] += kW1;
  }
  return ctr;
}

// Uniform in (0, 1], from 32 random bits.
inline double uint_to_unit_open(std::uint32_t x) { return (static_cast<double>(x) + 1.0) / 4294967296.0; }

// Standard normal at (seed, stream, index) by Box-Muller on one Philox block.
inline double philox_normal(std::uint64_t seed, std::uint32_t stream, std::uint64_t index) {
  const auto r = philox4x32({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), stream, 0u},
                            {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  const double u1 = uint_to_unit_open(r[0]);
  const double u2 = uint_to_unit_open(r[1]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace zt
