// Cached attention on the GPU, device code only (launched by cached_attention.cu; run on the CPU by
// the SIMT emulation tests). A block per (new position, query head, sample) of kWarps warps: warp w
// takes the cached positions w, w + kWarps, ... up to the query's own, each lane kLaneDims of the
// head's dimensions (e = lane + 32 k), a position's score a warp sum, and keeps an online softmax
// (running maximum m, sum s of exp(score - m), values weighted by it, rescaled when m rises); the
// warps' partial results then merge through shared memory, each weighted by exp(m_w - M). fp32
// with expf; each output rounded once. Decoding asks a handful of rows a step and is bound by
// reading the cache, not by arithmetic: no tiles, no tensor cores.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::cached_attention {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kLaneDims = 8;                         // head sizes up to 32 x 8 = 256
constexpr int kMaxHeadSize = kWarpSize * kLaneDims;  // kCachedAttentionMaxHeadSize (cached_attention.h)

struct Geometry {
  int P, Tq;          // the cache's positions, the new ones (its last Tq)
  int W, C, hs;       // a cache row's width, an output row's, a head's
  int n_head, group;  // query heads, query heads per key/value head
  int k_off, v_off;   // columns of the keys and the values in a cache row
  float scale;        // 1 / sqrt(hs)
};

// grid (Tq * n_head, B), kThreads threads.
template <typename T>
__global__ void cached_attention_kernel(T* out, const T* cache, Geometry g) {
  __shared__ float part_max[kWarps], part_sum[kWarps];
  __shared__ float part_acc[kWarps][kMaxHeadSize];
  const int h = static_cast<int>(blockIdx.x) % g.n_head, i = static_cast<int>(blockIdx.x) / g.n_head;
  const int b = static_cast<int>(blockIdx.y), kv = h / g.group;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int position = g.P - g.Tq + i;  // the query's; it attends to positions [0, position]
  const T* rows = cache + static_cast<std::int64_t>(b) * g.P * g.W;

  float q[kLaneDims], acc[kLaneDims];
#pragma unroll
  for (int k = 0; k < kLaneDims; ++k) {
    const int e = lane + k * kWarpSize;
    q[k] = e < g.hs ? load_act(rows + static_cast<std::int64_t>(position) * g.W + h * g.hs + e) : 0.0f;
    acc[k] = 0.0f;
  }
  float m = -INFINITY, s = 0.0f;
  for (int j = warp; j <= position; j += kWarps) {
    const T* key = rows + static_cast<std::int64_t>(j) * g.W + g.k_off + kv * g.hs;
    const T* value = rows + static_cast<std::int64_t>(j) * g.W + g.v_off + kv * g.hs;
    float part = 0.0f;
#pragma unroll
    for (int k = 0; k < kLaneDims; ++k) {
      const int e = lane + k * kWarpSize;
      if (e < g.hs) part += q[k] * load_act(key + e);
    }
    const float score = warp_sum(part) * g.scale;
    const float m_new = fmaxf(m, score);
    const float rescale = expf(m - m_new);  // 0 at the warp's first position (m = -inf)
    const float p = expf(score - m_new);
    s = s * rescale + p;
#pragma unroll
    for (int k = 0; k < kLaneDims; ++k) {
      const int e = lane + k * kWarpSize;
      if (e < g.hs) acc[k] = acc[k] * rescale + p * load_act(value + e);
    }
    m = m_new;
  }
  if (lane == 0) {
    part_max[warp] = m;
    part_sum[warp] = s;
  }
#pragma unroll
  for (int k = 0; k < kLaneDims; ++k) {
    const int e = lane + k * kWarpSize;
    if (e < g.hs) part_acc[warp][e] = acc[k];
  }
  __syncthreads();
  if (warp != 0) return;
  // Warp 0 merges: a warp that saw no position (m = -inf) weighs exp(-inf) = 0; warp 0 always
  // sees position 0, so M is finite.
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, part_max[w]);
  float weight[kWarps], total = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = expf(part_max[w] - M);
    total += part_sum[w] * weight[w];
  }
  T* o = out + (static_cast<std::int64_t>(b) * g.Tq + i) * g.C + h * g.hs;
#pragma unroll
  for (int k = 0; k < kLaneDims; ++k) {
    const int e = lane + k * kWarpSize;
    if (e >= g.hs) continue;
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += part_acc[w][e] * weight[w];
    store_act(o + e, sum / total);
  }
}

}  // namespace zt::cuda::detail::cached_attention
