// Internal to the CUDA kernels: the device-side helpers they share, device code only (no launch
// syntax, no host API), so that the SIMT emulator (tests/emulation/) compiles them as they are:
// fp32 vector accesses, bf16 conversions bit-identical to engine/base/core/bf16.h, fixed-order warp and
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

// kVec consecutive floats moved in 16-byte accesses: one float4 for kVec = 4, two for kVec = 8 (each
// address 16-byte aligned), a plain float for kVec = 1. Kernels templated on kVec take a wide
// instance only where the launcher checked that rows are a multiple of kVec floats long and every
// base pointer is aligned16, so every group starts on a 16-byte boundary.
template <int kVec>
struct FloatVec {
  static_assert(kVec == 1 || kVec == 4 || kVec == 8, "FloatVec holds 1, 4 or 8 floats");
  float v[kVec];

  __device__ __forceinline__ static FloatVec load(const float* p) {
    FloatVec r;
    if constexpr (kVec == 1) {
      r.v[0] = *p;
    } else {
#pragma unroll
      for (int h = 0; h < kVec / 4; ++h) {
        const float4 q = reinterpret_cast<const float4*>(p)[h];
        r.v[4 * h] = q.x;
        r.v[4 * h + 1] = q.y;
        r.v[4 * h + 2] = q.z;
        r.v[4 * h + 3] = q.w;
      }
    }
    return r;
  }
  __device__ __forceinline__ void store(float* p) const {
    if constexpr (kVec == 1) {
      *p = v[0];
    } else {
#pragma unroll
      for (int h = 0; h < kVec / 4; ++h) {
        reinterpret_cast<float4*>(p)[h] = make_float4(v[4 * h], v[4 * h + 1], v[4 * h + 2], v[4 * h + 3]);
      }
    }
  }
  __device__ __forceinline__ float& operator[](int i) { return v[i]; }
  __device__ __forceinline__ float operator[](int i) const { return v[i]; }
};

// bf16 -> fp32 is exact.
__device__ __forceinline__ float bf16_to_f32(std::uint16_t h) {
  return __uint_as_float(static_cast<unsigned>(h) << 16);
}

// fp32 -> bf16 rounding to nearest even, NaN kept quiet with its sign: the algorithm of
// engine/base/core/bf16.h, so GPU and CPU casts agree bit for bit (cuda_bf16's __float2bfloat16_rn
// returns a canonical NaN instead).
__device__ __forceinline__ std::uint16_t f32_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

// 2^x by the hardware's base-2 exponential (ex2.approx.ftz: about 2 ulp, one instruction where
// exp2f takes four and expf eleven); results below FLT_MIN flush to +0. Kernels whose inner loop
// is an exponential per element (the cross-entropy's) take exp(x - m) as
// exp2_ftz(fma(x, log2(e), -m log2(e))). The emulator (tests/emulation, where __CUDA_ARCH__ is not
// defined) computes exp2f and flushes the same way.
__device__ __forceinline__ float exp2_ftz(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  const float y = exp2f(x);
  return y < 1.17549435e-38f ? 0.0f : y;  // FLT_MIN; a NaN stays NaN
#endif
}

// Two fp32 results rounded to bf16 (nearest even), a in the low half: one conversion instruction
// on the GPU where f32_to_bf16 takes about seven integer ones a value, and the same bits for every
// non-NaN value. A NaN's bits may differ (the instruction returns its quiet NaN); the GPU's
// arithmetic already makes every NaN it produces canonical, so stores of computed values take it,
// and copies and casts, which must keep a NaN's payload, take f32_to_bf16.
__device__ __forceinline__ unsigned pack_bf16x2(float a, float b) {
#ifdef __CUDA_ARCH__
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));  // first source to the high half
  return r;
#else
  return f32_to_bf16(a) | (static_cast<unsigned>(f32_to_bf16(b)) << 16);
#endif
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

// The width of a memory-bound kernel's vector accesses over storage type T: 16 bytes, i.e. 4 floats
// or 8 bf16 values, the widest load one thread can issue.
template <typename T>
inline constexpr int kWideVec = static_cast<int>(16 / sizeof(T));

// FloatVec over storage type T: kVec consecutive activations as fp32 values. For float, kVec 4 and
// 8 are FloatVec's float4 accesses; for bf16, kVec = 8 is one 16-byte access (a uint4 of 8 values),
// kVec = 4 one 8-byte access (a uint2). The wide instances are taken only where the launcher
// checked aligned16 for every base pointer and rows of whole groups; kVec = 1 is one element.
template <typename T, int kVec>
struct ActVec {
  static_assert(kVec == 1 || kVec == 4 || kVec == 8, "ActVec holds 1, 4 or 8 values");
  float v[kVec];

  __device__ __forceinline__ static ActVec load(const T* p) { return widen(load_raw(p)); }
  __device__ __forceinline__ void store(T* p) const { store_raw(p, to_raw()); }
  // A group as stored, for kernels that issue a batch of loads before widening any of them (a
  // bf16 group held raw takes half the registers of its fp32 values): widen(load_raw(p)) == load(p).
  using Raw = std::conditional_t<
      kVec == 1, T,
      std::conditional_t<std::is_same_v<T, float>, FloatVec<kVec>, std::conditional_t<kVec == 8, uint4, uint2>>>;
  __device__ __forceinline__ static Raw load_raw(const T* p) {
    if constexpr (kVec == 1) {
      return *p;
    } else if constexpr (std::is_same_v<T, float>) {
      return FloatVec<kVec>::load(p);
    } else {
      return *reinterpret_cast<const Raw*>(p);
    }
  }
  __device__ __forceinline__ static ActVec widen(const Raw& raw) {
    ActVec r;
    if constexpr (kVec == 1) {
      r.v[0] = load_act(&raw);
    } else if constexpr (std::is_same_v<T, float>) {
#pragma unroll
      for (int i = 0; i < kVec; ++i) r.v[i] = raw[i];
    } else {
      unsigned w[kVec / 2];
      if constexpr (kVec == 8) {
        w[0] = raw.x, w[1] = raw.y, w[2] = raw.z, w[3] = raw.w;
      } else {
        w[0] = raw.x, w[1] = raw.y;
      }
#pragma unroll
      for (int k = 0; k < kVec / 2; ++k) {
        r.v[2 * k] = __uint_as_float(w[k] << 16);
        r.v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
      }
    }
    return r;
  }
  // The bits store would write (each bf16 rounded by f32_to_bf16), and their store:
  // store_raw(p, to_raw()) == store(p), and widen(to_raw()) holds the values stored.
  __device__ __forceinline__ Raw to_raw() const {
    if constexpr (kVec == 1) {
      T t;
      store_act(&t, v[0]);
      return t;
    } else if constexpr (std::is_same_v<T, float>) {
      FloatVec<kVec> f;
#pragma unroll
      for (int i = 0; i < kVec; ++i) f[i] = v[i];
      return f;
    } else {
      unsigned w[kVec / 2];
#pragma unroll
      for (int k = 0; k < kVec / 2; ++k) {
        w[k] = f32_to_bf16(v[2 * k]) | (static_cast<unsigned>(f32_to_bf16(v[2 * k + 1])) << 16);
      }
      if constexpr (kVec == 8) {
        return make_uint4(w[0], w[1], w[2], w[3]);
      } else {
        return make_uint2(w[0], w[1]);
      }
    }
  }
  __device__ __forceinline__ static void store_raw(T* p, const Raw& raw) {
    if constexpr (kVec == 1) {
      *p = raw;
    } else if constexpr (std::is_same_v<T, float>) {
      raw.store(p);
    } else {
      *reinterpret_cast<Raw*>(p) = raw;
    }
  }
  // store for values computed by arithmetic: bf16 packed by pack_bf16x2 (the same bits as store
  // but for a NaN's).
  __device__ __forceinline__ void store_computed(T* p) const {
    if constexpr (kVec == 1 || std::is_same_v<T, float>) {
      store(p);
    } else {
      unsigned w[kVec / 2];
#pragma unroll
      for (int k = 0; k < kVec / 2; ++k) w[k] = pack_bf16x2(v[2 * k], v[2 * k + 1]);
      if constexpr (kVec == 8) {
        store_raw(p, make_uint4(w[0], w[1], w[2], w[3]));
      } else {
        store_raw(p, make_uint2(w[0], w[1]));
      }
    }
  }
  __device__ __forceinline__ float& operator[](int i) { return v[i]; }
  __device__ __forceinline__ float operator[](int i) const { return v[i]; }
};

}  // namespace zt::cuda::detail
