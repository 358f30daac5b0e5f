// Blockwise int8 quantization kernels on the GPU, device code only (launched by int8_blocks.cu; run
// on the CPU by the SIMT emulation tests, tests/emulation/). The rule is
// kernels/contracts/int8_blocks.h's, in the same operations as the CPU reference (an exact max, one
// IEEE division for the scale and one per code, rint, one product back), so the bits match it.
// Quantizing: one warp per block of 256 values, each lane 8 of them (strided by 32: coalesced);
// dequantizing: one thread per value.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::int8q {

constexpr int kThreads = 256;
constexpr int kBlock = 256;  // int8_blocks::kBlock
constexpr int kPerLane = kBlock / kWarpSize;

// scales [blocks], codes [n rounded up to 4] from src [n] (T: float or __nv_bfloat16).
template <typename T>
__global__ void quantize(float* scales, std::int8_t* codes, const T* src, std::int64_t n) {
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  const std::int64_t padded = (n + 3) / 4 * 4;
  const int lane = threadIdx.x % kWarpSize;
  const std::int64_t warps_per_grid = std::int64_t{gridDim.x} * (blockDim.x / kWarpSize);
  for (std::int64_t b = blockIdx.x * std::int64_t{blockDim.x / kWarpSize} + threadIdx.x / kWarpSize; b < blocks;
       b += warps_per_grid) {
    const std::int64_t begin = b * kBlock;
    float x[kPerLane];
    float absmax = 0.0f, non_finite = 0.0f;
    for (int k = 0; k < kPerLane; ++k) {
      const std::int64_t i = begin + lane + k * kWarpSize;
      x[k] = i < n ? load_act(src + i) : 0.0f;
      const float a = fabsf(x[k]);
      if (!(a <= 3.402823466e38f)) non_finite = 1.0f;  // NaN or infinity
      absmax = fmaxf(absmax, a);
    }
    absmax = warp_max(absmax);
    non_finite = warp_max(non_finite);
    const float scale = non_finite != 0.0f ? __uint_as_float(0x7fc00000u) : absmax / 127.0f;
    if (lane == 0) scales[b] = scale;
    for (int k = 0; k < kPerLane; ++k) {
      const std::int64_t i = begin + lane + k * kWarpSize;
      if (i >= padded) break;
      const float q = i < n && scale > 0.0f ? fminf(fmaxf(rintf(x[k] / scale), -127.0f), 127.0f) : 0.0f;
      codes[i] = static_cast<std::int8_t>(q);
    }
  }
}

// dst [n] = codes * their block's scale (T: float or __nv_bfloat16), or dst (float) += that under
// Accumulate. An explicitly rounded product: nvcc would fuse it and the sum into an FMA.
template <typename T, bool Accumulate>
__global__ void dequantize(T* dst, const float* scales, const std::int8_t* codes, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const float v = __fmul_rn(static_cast<float>(codes[i]), scales[i / kBlock]);
    if constexpr (Accumulate) {
      store_act(dst + i, __fadd_rn(load_act(dst + i), v));
    } else {
      store_act(dst + i, v);
    }
  }
}

}  // namespace zt::cuda::detail::int8q
