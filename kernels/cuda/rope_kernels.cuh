// RoPE kernels on the GPU, device code only (launched by rope.cu; run on the CPU by the SIMT
// emulation tests): a thread per rotated pair (row, head, i), in place; the angle from
// kernels/contracts/rope_angles.h as on the CPU, its cosf and sinf in fp32; each result rounded
// once for bf16. `sign` -1 turns by minus the angle (the backward).
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/contracts/rope_angles.h"
#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::rope {

constexpr int kThreads = 256;

template <typename T>
__global__ void rope_kernel(T* x, std::int64_t rows, int T_len, int W, int n_heads, int head_size, float theta,
                            float sign) {
  const int half = head_size / 2;
  const std::int64_t pairs = rows * n_heads * half, stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t p = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; p < pairs; p += stride) {
    const int i = static_cast<int>(p % half);
    const int h = static_cast<int>((p / half) % n_heads);
    const std::int64_t r = p / (static_cast<std::int64_t>(half) * n_heads);
    const float angle = rope_angle(static_cast<int>(r % T_len), i, head_size, theta);
    const float c = cosf(angle), s = sign * sinf(angle);
    T* x1 = x + r * W + static_cast<std::int64_t>(h) * head_size + i;
    T* x2 = x1 + half;
    const float a = detail::load_act(x1), b = detail::load_act(x2);
    detail::store_act(x1, a * c - b * s);
    detail::store_act(x2, b * c + a * s);
  }
}

}  // namespace zt::cuda::detail::rope
