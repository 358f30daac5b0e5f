// Internal to the CUDA kernels (not part of the kernel API): context and view checks shared by the
// launchers, bf16 conversions bit-identical to engine/core/bf16.h, and fixed-order warp and block
// reductions. Fixed order matters: the same inputs give the same bits on every run.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "engine/core/check.h"
#include "engine/core/tensor.h"
#include "engine/device/cuda_check.h"
#include "kernels/cpu/activation_dtype.h"
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

// The block's dynamic shared memory (the bytes given at launch), 128-byte aligned. Kernels take it
// through this function rather than declaring the extern array themselves, so that the SIMT
// emulator (tests/emulation/) can stand in for it.
__device__ __forceinline__ unsigned char* dynamic_shared_memory() {
  extern __shared__ __align__(128) unsigned char dynamic_smem[];
  return dynamic_smem;
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

// ---- Activation storage: docs/precision.md, "bf16 activations: the kernel contract" ----
// Kernels templated on the activation storage type T (float, or __nv_bfloat16 for bf16
// activations) load through these helpers, compute in fp32 and store through them: a bf16 load
// widens exactly, a bf16 store rounds once to nearest even. The rounding is f32_to_bf16 above
// rather than __float2bfloat16_rn: the same for every non-NaN value, and it also keeps a NaN's sign
// and payload as the CPU reference does, so one-rounding ops (residual, dropout) match it bitwise.

// The DType whose elements T stores: DTypeOf for the device storage types.
template <typename T>
constexpr DType act_dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16>, "activations are float or bf16");
  return std::is_same_v<T, float> ? DType::kF32 : DType::kBF16;
}

// The dtype an op's activation operands share: F32 or BF16, ignoring omitted operands (no data).
// A mix, or another dtype, fails a ZT_CHECK naming `op`. One check for both backends.
using cpu::detail::activation_dtype;

// Calls f(ActType<T>{}) with T the storage type of `dtype` (F32 or BF16, see activation_dtype):
// one launcher body serves both instantiations of a templated kernel.
template <typename T>
struct ActType {
  using type = T;
};
template <typename F>
void dispatch_activation(DType dtype, F&& f) {
  if (dtype == DType::kBF16) {
    f(ActType<__nv_bfloat16>{});
  } else {
    f(ActType<float>{});
  }
}

// v's data as T, checking that T is v's dtype (TensorView::as for the device storage types).
template <typename T>
T* act_data(const TensorView& v) {
  ZT_CHECK(v.dtype == act_dtype_of<T>(), "view has dtype {}, the kernel reads {}", dtype_name(v.dtype),
           dtype_name(act_dtype_of<T>()));
  return static_cast<T*>(v.data);
}

// Whether p may take ActVec<T, 4>'s access: aligned to 4 elements of T (16 bytes of float, 8 of bf16).
template <typename T>
bool act_vec4_aligned(const T* p) {
  return aligned(p, 4 * sizeof(T));
}

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
// ---- end of activation storage ----

}  // namespace zt::cuda::detail
