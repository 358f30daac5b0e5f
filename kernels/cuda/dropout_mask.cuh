// Internal to the CUDA kernels: the mask of [Note: dropout masks] (kernels/contracts/dropout_spec.h)
// on the device, shared by the dropout kernel and the flash attention kernels' fused dropout on the
// probabilities, so both draw exactly the CPU's bits.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/contracts/dropout_spec.h"

namespace zt::cuda::detail {

// Philox4x32-10 with the rounds of zt::philox4x32 (engine/base/core/philox.h): same bits on both sides.
__device__ __forceinline__ uint4 philox4x32(uint4 ctr, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const std::uint32_t hi0 = __umulhi(kM0, ctr.x), lo0 = kM0 * ctr.x;
    const std::uint32_t hi1 = __umulhi(kM1, ctr.z), lo1 = kM1 * ctr.z;
    ctr = make_uint4(hi1 ^ ctr.y ^ k0, lo1, hi0 ^ ctr.w ^ k1, lo0);
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

// A DropoutSpec as kernels take it by value.
struct MaskParams {
  std::uint64_t seed;
  std::uint32_t site;
  std::uint32_t threshold;  // kept iff the element's 32 random bits are >= this
  float scale;              // 1 / (1 - p), rounded once on the host as the CPU does
  std::int64_t first_sample;
  bool active;  // p > 0; when false no bits are drawn and every factor is 1
};

inline MaskParams mask_params(const DropoutSpec& spec) {
  return MaskParams{
      spec.seed,         spec.site,    dropout_rules::keep_threshold(spec.p), dropout_rules::keep_scale(spec.p),
      spec.first_sample, spec.active()};
}

// The 4 elements' random bits of Philox block `block` of global sample g.
__device__ __forceinline__ uint4 mask_bits(const MaskParams& m, std::uint64_t g, std::uint32_t block) {
  return philox4x32(make_uint4(block, m.site, static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32)),
                    static_cast<std::uint32_t>(m.seed), static_cast<std::uint32_t>(m.seed >> 32));
}

__device__ __forceinline__ std::uint32_t lane_of(const uint4& bits, int lane) {
  return lane == 0 ? bits.x : lane == 1 ? bits.y : lane == 2 ? bits.z : bits.w;
}

// Mask factors of one sample's elements, element by element (scale where kept, 0 where dropped).
// Remembers the last Philox block drawn, so a walk over consecutive elements draws each block once.
struct MaskCursor {
  MaskParams m;
  std::uint64_t g;          // global sample index
  std::int64_t block = -1;  // the Philox block `bits` holds
  uint4 bits{};

  __device__ __forceinline__ MaskCursor(const MaskParams& params, std::int64_t local_sample)
      : m(params), g(static_cast<std::uint64_t>(params.first_sample + local_sample)) {}

  // Factor of element e (< 2^34: check_spec bounds a sample's elements by the 32-bit block counter).
  __device__ __forceinline__ float factor(std::int64_t e) {
    if (!m.active) return 1.0f;
    if (e / 4 != block) {
      block = e / 4;
      bits = mask_bits(m, g, static_cast<std::uint32_t>(block));
    }
    return lane_of(bits, static_cast<int>(e % 4)) >= m.threshold ? m.scale : 0.0f;
  }
};

}  // namespace zt::cuda::detail
