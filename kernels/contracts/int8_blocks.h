// The blockwise int8 form that quantized collectives move (ZeRO++'s qwZ and qgZ, zero.gather_dtype
// and zero.cross_group_grad_dtype): n values cut into blocks of kInt8Block consecutive values, each
// block sent as one fp32 scale and one int8 code per value. One rule, the same bits on every
// backend (the CPU's kernel and CUDA's, which the emulation tests hold to it):
//   scale = max |x| over the block / 127          (one IEEE division, rounded to nearest)
//   code  = clamp(rint(x / scale), -127, 127)      (0 where the scale is 0: an all-zero block)
//   value = code * scale                           (one fp32 product, then the destination's dtype)
// A block holding a NaN or an infinity gets a NaN scale and zero codes, so the whole block comes
// back NaN and the trainer's non-finite check stops the run instead of training on a clamp.
// The packed form of n values is I32 words, what a communicator moves as is: the blocks' scales
// (fp32 bits), then the n codes, four to a word, the last word padded with zero codes.
#pragma once

#include <cstdint>

namespace zt::int8_blocks {

constexpr std::int64_t kBlock = 256;

constexpr std::int64_t num_blocks(std::int64_t n) { return (n + kBlock - 1) / kBlock; }
// I32 words of the packed form of n values.
constexpr std::int64_t packed_words(std::int64_t n) { return num_blocks(n) + (n + 3) / 4; }

}  // namespace zt::int8_blocks
