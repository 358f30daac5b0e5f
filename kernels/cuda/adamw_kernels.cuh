// AdamW on the GPU as one fused multi-tensor kernel, device code only (launched by adamw.cu; run on
// the CPU by the SIMT emulation tests, tests/emulation/): a launch takes up to kMaxSlices flat ranges
// (a shard's parameters, merged into runs of equal decay by the optimizer) in a table passed as a
// kernel parameter, and each block updates one kChunk-element chunk of one range (read g, p, m, v;
// write p, m, v and the working copy; 16-byte groups where every operand of the range is aligned).
// The per-step scalars are formed on the host exactly as the CPU kernel forms them, and every
// operation is written with an explicit rounding intrinsic (__fmul_rn, ...) so nvcc cannot contract
// it into an FMA: the CPU (ISO C++, no contraction) and GPU updates are then bitwise equal.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/contracts/adamw_params.h"  // AdamWCoeffs
#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::adamw {

constexpr int kThreads = 256;

using zt::AdamWCoeffs;

struct NoWorkingCopy {};

// One element's update; update_one and update_group call it, so both paths give the same bits.
__device__ __forceinline__ void update(float& p, float g_raw, float& m, float& v, const AdamWCoeffs& k,
                                       float grad_scale) {
  const float g = __fmul_rn(g_raw, grad_scale);
  const float decayed = __fmul_rn(p, k.decay);
  const float mi = __fadd_rn(m, __fmul_rn(k.one_minus_beta1, __fsub_rn(g, m)));
  const float vi = __fadd_rn(__fmul_rn(v, k.beta2), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
  p = __fsub_rn(decayed, __fdiv_rn(__fmul_rn(k.step_size, mi), denom));
  m = mi;
  v = vi;
}

__device__ __forceinline__ float load(const float* g, std::int64_t i) { return g[i]; }
__device__ __forceinline__ float load(const std::uint16_t* g, std::int64_t i) { return detail::bf16_to_f32(g[i]); }
__device__ __forceinline__ void store(NoWorkingCopy*, std::int64_t, float) {}
__device__ __forceinline__ void store(float* w, std::int64_t i, float p) { w[i] = p; }
__device__ __forceinline__ void store(std::uint16_t* w, std::int64_t i, float p) { w[i] = detail::f32_to_bf16(p); }

// The activation-storage type ActVec reads for a gradient or working copy of element type E
// (bf16 travels as std::uint16_t through the slice table).
template <typename E>
using StorageOf = std::conditional_t<std::is_same_v<E, float>, float, __nv_bfloat16>;

// kGroup consecutive elements from index kGroup * q: 16-byte accesses (two float4 of fp32, one
// uint4 of bf16).
constexpr int kGroup = 8;
template <typename E>
__device__ __forceinline__ FloatVec<kGroup> load_group(const E* g, std::int64_t q) {
  using Vec = ActVec<StorageOf<E>, kGroup>;
  const Vec a = Vec::load(reinterpret_cast<const StorageOf<E>*>(g) + kGroup * q);
  FloatVec<kGroup> f;
#pragma unroll
  for (int i = 0; i < kGroup; ++i) f[i] = a[i];
  return f;
}
__device__ __forceinline__ void store_group(NoWorkingCopy*, std::int64_t, const FloatVec<kGroup>&) {}
template <typename E>
__device__ __forceinline__ void store_group(E* w, std::int64_t q, const FloatVec<kGroup>& p) {
  ActVec<StorageOf<E>, kGroup> a;
#pragma unroll
  for (int i = 0; i < kGroup; ++i) a[i] = p[i];
  a.store(reinterpret_cast<StorageOf<E>*>(w) + kGroup * q);
}

// Per-element and per-group updates; the kernel below calls them, so both give the same bits.
template <typename G, typename W>
__device__ __forceinline__ void update_one(float* param, const G* grad, float* m, float* v, W* working, std::int64_t i,
                                           const AdamWCoeffs& k, float grad_scale) {
  float p = param[i], mi = m[i], vi = v[i];
  update(p, load(grad, i), mi, vi, k, grad_scale);
  m[i] = mi;
  v[i] = vi;
  param[i] = p;
  store(working, i, p);
}

template <typename G, typename W>
__device__ __forceinline__ void update_group(float* param, const G* grad, float* m, float* v, W* working,
                                             std::int64_t q, const AdamWCoeffs& k, float grad_scale) {
  using F = FloatVec<kGroup>;
  F p = F::load(param + kGroup * q), mq = F::load(m + kGroup * q), vq = F::load(v + kGroup * q);
  const F g = load_group(grad, q);
#pragma unroll
  for (int i = 0; i < kGroup; ++i) update(p[i], g[i], mq[i], vq[i], k, grad_scale);
  mq.store(m + kGroup * q);
  vq.store(v + kGroup * q);
  p.store(param + kGroup * q);
  store_group(working, q, p);
}

constexpr std::int64_t kChunk = 4096;  // elements per block: two 8-element groups per thread
constexpr int kMaxSlices = 48;         // keeps the table under the classic 4 KB parameter limit

struct SliceDesc {
  float* param;
  const void* grad;
  float* m;
  float* v;
  void* working;
  std::int64_t n;
  int decays;
  int vec;  // every operand aligned16, for kGroup-element groups
};

struct SliceTable {
  SliceDesc slice[kMaxSlices];
  std::int64_t first_block[kMaxSlices];  // slice s owns blocks [first_block[s], first_block[s + 1])
  int count;
};
static_assert(sizeof(SliceTable) <= 4000, "the slice table must fit the kernel parameter space");

template <typename G, typename W>
__global__ void __launch_bounds__(kThreads)
    adamw_slices_kernel(const __grid_constant__ SliceTable table, AdamWCoeffs decayed, AdamWCoeffs plain,
                        float grad_scale) {
  // The slice owning this block: the last one whose first block is <= blockIdx.x (slices are never
  // empty, so first_block is strictly increasing).
  const std::int64_t block = blockIdx.x;
  int lo = 0, hi = table.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.first_block[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const SliceDesc& s = table.slice[lo];
  const std::int64_t begin = (block - table.first_block[lo]) * kChunk;  // a multiple of kGroup
  const std::int64_t end = begin + kChunk < s.n ? begin + kChunk : s.n;
  const AdamWCoeffs& k = s.decays ? decayed : plain;
  const G* grad = static_cast<const G*>(s.grad);
  W* working = static_cast<W*>(s.working);
  std::int64_t tail = begin;
  if (s.vec) {
    const std::int64_t q_end = end / kGroup;
    for (std::int64_t q = begin / kGroup + threadIdx.x; q < q_end; q += kThreads) {
      update_group(s.param, grad, s.m, s.v, working, q, k, grad_scale);
    }
    tail = kGroup * q_end;
  }
  for (std::int64_t i = tail + threadIdx.x; i < end; i += kThreads) {
    update_one(s.param, grad, s.m, s.v, working, i, k, grad_scale);
  }
}

}  // namespace zt::cuda::detail::adamw
