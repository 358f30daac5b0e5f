// RoPE kernels on the GPU, device code only (launched by rope.cu; run on the CPU by the SIMT
// emulation tests): a thread per (row, i) over the row's rotated heads, in place; the angle from
// kernels/contracts/rope_angles.h as on the CPU, its cosf and sinf in fp32; each result rounded
// once for bf16. `sign` -1 turns by minus the angle (the backward).
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/contracts/rope_angles.h"
#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::rope {

constexpr int kThreads = 256;

// A thread per (row, i): the angle of the row's position and frequency i, its cosf and sinf once,
// then pair (i, i + head_size / 2) of each of the row's first n_heads heads in turn. Every head of
// a row turns by the same angles, and the first version, a thread a pair, computed them once per
// head: on the H200 at d650922 it ran at 14% of copy bandwidth at Llama 3.2 1B's widths (40 heads
// of 64 rotated a row: 140 us for 8192 rows). The arithmetic of each element is unchanged.
template <typename T>
__global__ void rope_kernel(T* x, std::int64_t rows, int T_len, int W, int n_heads, int head_size, float theta,
                            float sign) {
  const int half = head_size / 2;
  const std::int64_t items = rows * half, stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t p = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; p < items; p += stride) {
    const int i = static_cast<int>(p % half);
    const std::int64_t r = p / half;
    const float angle = rope_angle(static_cast<int>(r % T_len), i, head_size, theta);
    const float c = cosf(angle), s = sign * sinf(angle);
    T* row = x + r * W + i;
#pragma unroll 4
    for (int h = 0; h < n_heads; ++h) {
      T* x1 = row + static_cast<std::int64_t>(h) * head_size;
      T* x2 = x1 + half;
      const float a = detail::load_act(x1), b = detail::load_act(x2);
      detail::store_act(x1, a * c - b * s);
      detail::store_act(x2, b * c + a * s);
    }
  }
}

}  // namespace zt::cuda::detail::rope
