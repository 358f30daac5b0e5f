// Cached attention on the GPU, device code only (launched by cached_attention.cu; run on the CPU by
// the SIMT emulation tests). A block per (new position, query head, sample, split) of kWarps warps:
// warp w takes the split's cached positions w, w + kWarps, ... up to the query's own, each lane
// kLaneDims of the head's dimensions (e = lane + 32 k), a position's score a warp sum, and keeps an
// online softmax (running maximum m, sum s of exp(score - m), values weighted by it, rescaled when
// m rises); the warps' partial results then merge through shared memory, each weighted by
// exp(m_w - M). fp32 with expf; each output rounded once. Decoding asks a handful of rows a step and
// is bound by reading the cache, not by arithmetic: no tiles, no tensor cores.
//
// [Note: split positions]
// A token's decoding step has one query row: n_head blocks (12 for GPT-2) for the whole GPU, each
// warp walking a quarter of the cache one position at a time, each position's score waiting on its
// key's load, so the step is bound by that chain's latency rather than by bandwidth (flash-decoding's
// observation). The host therefore splits the cache's positions into `splits` runs of `span` (one
// block each) until the grid has about two blocks an SM; each block writes its unnormalised result
// with its maximum and sum (a Partial), and cached_attention_combine merges a query's splits in
// split order, each weighted by exp(m_z - M). One split (a prompt's many rows, or a short cache)
// writes the output directly, as before the splits.
#pragma once

#include <math.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/contracts/kernel_scratch.h"
#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::cached_attention {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kLaneDims = 8;                         // head sizes up to 32 x 8 = 256
constexpr int kMaxHeadSize = kWarpSize * kLaneDims;  // kCachedAttentionMaxHeadSize (cached_attention.h)

struct Geometry {
  int P, Tq;           // the cache's positions, the new ones (its last Tq)
  int W, C, hs;        // a cache row's width, an output row's, a head's
  int n_head, group;   // query heads, query heads per key/value head
  int k_off, v_off;    // columns of the keys and the values in a cache row
  float scale;         // 1 / sqrt(hs)
  int splits = 1;      // runs of cached positions a query's blocks split ([Note: split positions])
  int span = 1 << 30;  // positions a split covers (split z: [z span, (z + 1) span))
};

// The splits: about two blocks an SM on an H100 or H200 (132 SMs), a grid of fewer (new position, head, sample)
// blocks splits the positions until it has about this many, into at most one split per
// kernel_scratch::kCachedMinSpan positions (so a split holds about that many or more, and its
// warps walk about a quarter of it each, enough to cover their start and the merge); at most
// kCachedMaxSplits. The rule lives in kernels/contracts/kernel_scratch.h, whose prediction counts
// the splits' partials.
//
// {splits, span} for a cache of `positions` and a grid of `blocks` (new position, head, sample)
// blocks: split z covers [z span, (z + 1) span); {1, positions} for a prompt's many rows or a short
// cache. Host code (the launcher's, and the emulation tests').
inline std::pair<int, int> split_positions(std::int64_t blocks, std::int64_t positions) {
  return kernel_scratch::cached_attention_splits(blocks, positions);
}

// A split's unnormalised result for one (sample, new position, head): its maximum score m (-inf
// where the split holds none of the query's positions), its sum of exp(score - m), then hs values
// of sum exp(score - m) v; partials[((b Tq + i) n_head + h) splits + z] at kPartialFloats each.
constexpr int kPartialFloats = 2 + kMaxHeadSize;
static_assert(kPartialFloats == kernel_scratch::kCachedPartialFloats);

// grid (Tq * n_head, B, splits), kThreads threads; `partials` (fp32) used only when g.splits > 1.
template <typename T>
__global__ void cached_attention_kernel(T* out, float* partials, const T* cache, Geometry g) {
  __shared__ float part_max[kWarps], part_sum[kWarps];
  __shared__ float part_acc[kWarps][kMaxHeadSize];
  const int h = static_cast<int>(blockIdx.x) % g.n_head, i = static_cast<int>(blockIdx.x) / g.n_head;
  const int b = static_cast<int>(blockIdx.y), kv = h / g.group, z = static_cast<int>(blockIdx.z);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int position = g.P - g.Tq + i;  // the query's; it attends to positions [0, position]
  const int first = z * g.span;         // this split's: [first, last]
  const int last = position < first + g.span - 1 ? position : first + g.span - 1;
  const T* rows = cache + static_cast<std::int64_t>(b) * g.P * g.W;

  float q[kLaneDims], acc[kLaneDims];
#pragma unroll
  for (int k = 0; k < kLaneDims; ++k) {
    const int e = lane + k * kWarpSize;
    q[k] = e < g.hs ? load_act(rows + static_cast<std::int64_t>(position) * g.W + h * g.hs + e) : 0.0f;
    acc[k] = 0.0f;
  }
  float m = -INFINITY, s = 0.0f;
  for (int j = first + warp; j <= last; j += kWarps) {
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
  // Warp 0 merges: a warp that saw no position (m = -inf) weighs exp(-inf) = 0. One split: warp 0
  // always sees position 0, so M is finite. Several: a split past the query's position sees none
  // (M = -inf), and records so.
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, part_max[w]);
  float weight[kWarps], total = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = M == -INFINITY ? 0.0f : expf(part_max[w] - M);
    total += part_sum[w] * weight[w];
  }
  // One split: the output. Several: this split's partial, its values unnormalised.
  const std::int64_t row = static_cast<std::int64_t>(b) * g.Tq + i;
  float* part = g.splits > 1 ? partials + ((row * g.n_head + h) * g.splits + z) * kPartialFloats : nullptr;
  if (part != nullptr && lane == 0) {
    part[0] = M;
    part[1] = total;
  }
  T* o = out + row * g.C + h * g.hs;
#pragma unroll
  for (int k = 0; k < kLaneDims; ++k) {
    const int e = lane + k * kWarpSize;
    if (e >= g.hs) continue;
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += part_acc[w][e] * weight[w];
    if (part != nullptr) {
      part[2 + e] = sum;
    } else {
      store_act(o + e, sum / total);
    }
  }
}

// grid (Tq * n_head, B), one warp: a query's splits merged in split order into its output, each
// weighted by exp(m_z - M) (0 for a split that held none of its positions; split 0 holds position 0,
// so M is finite), the sum of the weighted values over the sum of the weighted sums, rounded once.
template <typename T>
__global__ void cached_attention_combine(T* out, const float* partials, Geometry g) {
  const int h = static_cast<int>(blockIdx.x) % g.n_head, i = static_cast<int>(blockIdx.x) / g.n_head;
  const int b = static_cast<int>(blockIdx.y), lane = static_cast<int>(threadIdx.x);
  const std::int64_t row = static_cast<std::int64_t>(b) * g.Tq + i;
  const float* part = partials + (row * g.n_head + h) * g.splits * kPartialFloats;
  float M = -INFINITY;
  for (int z = 0; z < g.splits; ++z) M = fmaxf(M, part[z * kPartialFloats]);
  float total = 0.0f, acc[kLaneDims] = {};
  for (int z = 0; z < g.splits; ++z) {
    const float* p = part + z * kPartialFloats;
    const float m = p[0];
    const float weight = m == -INFINITY ? 0.0f : expf(m - M);
    total += p[1] * weight;
#pragma unroll
    for (int k = 0; k < kLaneDims; ++k) {
      const int e = lane + k * kWarpSize;
      if (e < g.hs) acc[k] += p[2 + e] * weight;
    }
  }
  T* o = out + row * g.C + h * g.hs;
#pragma unroll
  for (int k = 0; k < kLaneDims; ++k) {
    const int e = lane + k * kWarpSize;
    if (e < g.hs) store_act(o + e, acc[k] / total);
  }
}

}  // namespace zt::cuda::detail::cached_attention
