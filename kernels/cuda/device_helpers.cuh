// Internal to the CUDA kernels: the device-side helpers they share, device code only (no launch
// syntax, no host API), so that the SIMT emulator (tests/emulation/) compiles them as they are:
// fp32 vector accesses, bf16 conversions bit-identical to engine/core/bf16.h, fixed-order warp and
// block reductions (the same inputs give the same bits on every run), and the activation storage
// helpers of docs/precision.md. kernels/cuda/common.cuh adds the launchers' host-side helpers.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace zt::cuda::detail {

constexpr int kWarpSize = 32;

// kVec consecutive floats moved as one access: a float4 (one 16-byte load or store; the address must
// be 16-byte aligned) for kVec = 4, a plain float for kVec = 1. Kernels templated on kVec take the
// 4-wide instance only where the launcher checked that rows are a multiple of 4 floats long and
// every base pointer is aligned16, so every group of 4 starts on a 16-byte boundary.
template <int kVec>
struct FloatVec {
  static_assert(kVec == 1 || kVec == 4, "FloatVec holds 1 or 4 floats");
  float v[kVec];

  __device__ __forceinline__ static FloatVec load(const float* p) {
    if constexpr (kVec == 4) {
      const float4 q = *reinterpret_cast<const float4*>(p);
      return FloatVec{{q.x, q.y, q.z, q.w}};
    } else {
      return FloatVec{{*p}};
    }
  }
  __device__ __forceinline__ void store(float* p) const {
    if constexpr (kVec == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      *p = v[0];
    }
  }
  __device__ __forceinline__ float& operator[](int i) { return v[i]; }
  __device__ __forceinline__ float operator[](int i) const { return v[i]; }
};

// bf16 -> fp32 is exact.
__device__ __forceinline__ float bf16_to_f32(std::uint16_t h) { return __uint_as_float(static_cast<unsigned>(h) << 16); }

// fp32 -> bf16 rounding to nearest even, NaN kept quiet with its sign: the algorithm of
// engine/core/bf16.h, so GPU and CPU casts agree bit for bit (cuda_bf16's __float2bfloat16_rn
// returns a canonical NaN instead).
__device__ __forceinline__ std::uint16_t f32_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int off = kWarpSize / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int off = kWarpSize / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024), returned to every thread. The
// order (xor butterflies in each warp, then warp totals in index order) depends on blockDim only.
// `shared` holds 32 values; it may be reused after the call returns.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  v = warp_sum(v);
  __syncthreads();  // an earlier call's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < num_warps ? shared[lane] : T(0);
  return warp_sum(total);
}

__device__ inline float block_max(float v, float* shared) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int num_warps = blockDim.x / kWarpSize;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = lane < num_warps ? shared[lane] : -INFINITY;
  return warp_max(m);
}

// ---- activation storage (docs/precision.md) ----
// Kernels templated on the activation storage type T (float, or __nv_bfloat16 for bf16
// activations) load through these helpers, compute in fp32 and store through them: a bf16 load
// widens exactly, a bf16 store rounds once to nearest even. The rounding is f32_to_bf16 above
// rather than __float2bfloat16_rn: the same for every non-NaN value, and it also keeps a NaN's sign
// and payload as the CPU reference does, so one-rounding ops (residual, dropout) match it bitwise.

__device__ __forceinline__ float load_act(const float* p) { return *p; }
__device__ __forceinline__ float load_act(const __nv_bfloat16* p) { return bf16_to_f32(__bfloat16_as_ushort(*p)); }
__device__ __forceinline__ void store_act(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_act(__nv_bfloat16* p, float v) { *p = __ushort_as_bfloat16(f32_to_bf16(v)); }

// FloatVec over storage type T: kVec consecutive activations as fp32 values. kVec = 4 is one access
// of 4 * sizeof(T) bytes (a float4, or a uint2 of 4 bf16), taken only where the launcher checked
// act_vec4_aligned for every base pointer and rows of whole groups; kVec = 1 is one element.
template <typename T, int kVec>
struct ActVec {
  static_assert(kVec == 1 || kVec == 4, "ActVec holds 1 or 4 values");
  float v[kVec];

  __device__ __forceinline__ static ActVec load(const T* p) {
    if constexpr (kVec == 4 && std::is_same_v<T, float>) {
      const float4 q = *reinterpret_cast<const float4*>(p);
      return ActVec{{q.x, q.y, q.z, q.w}};
    } else if constexpr (kVec == 4) {  // element 0 is the low half of the first word
      const uint2 q = *reinterpret_cast<const uint2*>(p);
      return ActVec{{__uint_as_float(q.x << 16), __uint_as_float(q.x & 0xffff0000u), __uint_as_float(q.y << 16),
                     __uint_as_float(q.y & 0xffff0000u)}};
    } else {
      return ActVec{{load_act(p)}};
    }
  }
  __device__ __forceinline__ void store(T* p) const {
    if constexpr (kVec == 4 && std::is_same_v<T, float>) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else if constexpr (kVec == 4) {
      *reinterpret_cast<uint2*>(p) =
          make_uint2(f32_to_bf16(v[0]) | (static_cast<unsigned>(f32_to_bf16(v[1])) << 16),
                     f32_to_bf16(v[2]) | (static_cast<unsigned>(f32_to_bf16(v[3])) << 16));
    } else {
      store_act(p, v[0]);
    }
  }
  __device__ __forceinline__ float& operator[](int i) { return v[i]; }
  __device__ __forceinline__ float operator[](int i) const { return v[i]; }
};

}  // namespace zt::cuda::detail
