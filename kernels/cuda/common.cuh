// Internal to the CUDA kernels (not part of the kernel API): context and view checks shared by the
// launchers, bf16 conversions bit-identical to engine/core/bf16.h, and fixed-order warp and block
// reductions. Fixed order matters: the same inputs give the same bits on every run.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "engine/core/check.h"
#include "engine/core/tensor.h"
#include "engine/device/cuda_check.h"
#include "kernels/cuda/kernel_resources.h"
#include "kernels/exec_context.h"

namespace zt::cuda::detail {

constexpr int kWarpSize = 32;

inline cudaStream_t stream_of(const ExecContext& ctx) {
  ZT_CHECK(ctx.device == Device::kCUDA, "a CUDA kernel was given a {} context", device_name(ctx.device));
  return static_cast<cudaStream_t>(ctx.cuda_stream);
}

inline KernelResources& resources_of(const ExecContext& ctx) {
  ZT_CHECK(ctx.cuda_resources != nullptr, "CUDA kernels need ExecContext::cuda_resources");
  return *ctx.cuda_resources;
}

// Every non-empty view a CUDA kernel touches must live on the GPU.
inline void check_on_gpu(const TensorView& v, const char* name) {
  ZT_CHECK(v.data == nullptr || v.device == Device::kCUDA, "{} is on the {}, the kernel runs on the GPU", name,
           device_name(v.device));
}

// Whether p is a multiple of `bytes` (a vector access's width).
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }
inline bool aligned16(const void* p) { return aligned(p, 16); }

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

inline unsigned int grid_for(std::int64_t n, int threads, std::int64_t max_blocks = 65535LL * 32) {
  std::int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned int>(blocks < max_blocks ? blocks : max_blocks);
}

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

}  // namespace zt::cuda::detail
