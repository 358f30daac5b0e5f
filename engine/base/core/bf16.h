// bfloat16 storage type and its conversions: fp32 -> bf16 rounds to nearest, ties to even, and
// keeps NaN (quiet) and +-Inf; bf16 -> fp32 is exact. Header-only so kernels can inline it.
#pragma once

#include <bit>
#include <cstdint>

namespace zt {

struct bf16 {
  std::uint16_t bits;
};
static_assert(sizeof(bf16) == 2);

inline bf16 float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign and force a quiet payload bit.
    return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  }
  // Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate. Inf stays Inf,
  // and values that round past the largest finite bf16 become Inf, as IEEE rounding requires.
  std::uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return bf16{static_cast<std::uint16_t>(u >> 16)};
}

inline float bf16_to_float(bf16 h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h.bits) << 16); }

// fp32 value after a round trip through bf16 (what a bf16 store then load yields).
inline float round_to_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

}  // namespace zt
