// IEEE 754 half precision (F16, as safetensors stores a model saved in float16), read exactly.
#pragma once

#include <bit>
#include <cstdint>

namespace zt {

// The float a half's bits hold, exactly (every half is a float): its subnormals, infinities and
// NaNs (payload kept) included.
inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));  // inf, nan
  if (exp == 0) {
    if (man == 0) return std::bit_cast<float>(sign);
    exp = 127 - 15 + 1;  // subnormal: normalised, the leading 1 shifted up to the implicit bit
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    man &= 0x3FFu;
    return std::bit_cast<float>(sign | (exp << 23) | (man << 13));
  }
  return std::bit_cast<float>(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

}  // namespace zt
