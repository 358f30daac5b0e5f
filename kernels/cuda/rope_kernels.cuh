// RoPE kernels on the GPU, device code only (launched by rope.cu; run on the CPU by the SIMT
// emulation tests): a thread per (row, i) over the row's rotated heads, in place; the angle from
// kernels/contracts/rope_angles.h as on the CPU (each frequency computed on the host: a
// FrequencyTable), its cosf and sinf in fp32; each result rounded once for bf16. `sign` -1 turns
// by minus the angle (the backward); row r is at position first_position + r % T_len.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/contracts/rope_angles.h"
#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::rope {

constexpr int kThreads = 256;
constexpr int kHeadBatch = 8;  // heads whose pairs a thread loads at once

// The frequencies inv_freq_i, i < head_size / 2, as the host computes them (rope_inv_freq), passed
// to the kernel by value. The device's powf is within an ulp but not always the correctly rounded
// value glibc's gives: at Llama 3.2 1B's theta 500000 and head size 64, frequencies 3 and 4 came
// out an ulp off (libdevice's powf evaluated on the host), which at position 8190 moves the angle
// by an ulp, 2.4e-4 rad, against the CPU's. From the host the product t * inv_freq_i is the CPU's
// bit for bit. Head sizes past 2 * kMaxTableFrequencies (none the models use) compute each
// frequency per thread as before.
constexpr int kMaxTableFrequencies = 128;
struct FrequencyTable {
  int count = 0;  // 0: none on the table (compute per thread)
  float inv[kMaxTableFrequencies];
};

inline FrequencyTable frequency_table(int head_size, const RopeFrequencies& freq) {
  FrequencyTable t{};
  if (head_size / 2 > kMaxTableFrequencies) return t;
  t.count = head_size / 2;
  for (int i = 0; i < t.count; ++i) t.inv[i] = rope_inv_freq(i, head_size, freq);
  return t;
}

// A thread per (row, i): the angle of the row's position and frequency i, its cosf and sinf once,
// then pair (i, i + head_size / 2) of each of the row's first n_heads heads in turn. Every head of
// a row turns by the same angles, and the first version, a thread a pair, computed them once per
// head: on the H200 at d650922 it ran at 14% of copy bandwidth at Llama 3.2 1B's widths (40 heads
// of 64 rotated a row: 140 us for 8192 rows). The arithmetic of each element is unchanged.
template <typename T>
__global__ void rope_kernel(T* x, std::int64_t rows, int T_len, int W, int n_heads, int head_size, RopeFrequencies freq,
                            const __grid_constant__ FrequencyTable table, float sign, int first_position) {
  const int half = head_size / 2;
  const std::int64_t items = rows * half, stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t p = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; p < items; p += stride) {
    const int i = static_cast<int>(p % half);
    const std::int64_t r = p / half;
    const int t = first_position + static_cast<int>(r % T_len);
    const float angle = i < table.count ? static_cast<float>(t) * table.inv[i] : rope_angle(t, i, head_size, freq);
    const float c = cosf(angle), s = sign * sinf(angle);
    T* row = x + r * W + i;
    // kHeadBatch heads' pairs loaded before any is turned and stored: the compiler cannot tell that
    // a head's stores miss the next head's loads, so a head at a time took a round trip to memory
    // each ([Note: loads in batches] in row_batches.cuh; 40 a row at Llama 3.2 1B's widths).
    for (int h0 = 0; h0 < n_heads; h0 += kHeadBatch) {
      float a[kHeadBatch], b[kHeadBatch];
#pragma unroll
      for (int k = 0; k < kHeadBatch; ++k) {
        const T* x1 = row + static_cast<std::int64_t>(h0 + k) * head_size;
        a[k] = h0 + k < n_heads ? detail::load_act(x1) : 0.0f;
        b[k] = h0 + k < n_heads ? detail::load_act(x1 + half) : 0.0f;
      }
#pragma unroll
      for (int k = 0; k < kHeadBatch; ++k) {
        if (h0 + k < n_heads) {
          T* x1 = row + static_cast<std::int64_t>(h0 + k) * head_size;
          detail::store_act(x1, a[k] * c - b[k] * s);
          detail::store_act(x1 + half, b[k] * c + a[k] * s);
        }
      }
    }
  }
}

}  // namespace zt::cuda::detail::rope
