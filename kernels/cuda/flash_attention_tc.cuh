// Internal to kernels/cuda/flash_attention.cu: the tensor-core (bf16 WMMA) flash attention kernels
// for BF16 activations. Same contract as the CUDA-core kernels there (flash_attention.h), with the
// products P V, dS K, dS Q and P^T dO taking bf16 operands: P and dS are rounded once to bf16
// before their product (FlashAttention-2's choice), everything else as docs/precision.md says.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/dropout_mask.cuh"

namespace zt::cuda::detail {

// One attention problem: qkv [B, T, W], each row q | k | v with NH query heads and NKV key/value
// heads of hs = C / NH columns (W = C + 2 NKV hs; multi-head attention: NKV = NH, W = 3C); out and
// dout [B, T, C]; scale = 1 / sqrt(hs). Query head h reads key/value head h / (NH / NKV), the
// grouped-query attention of transformers' repeat_kv. Build it with flash_geometry.
struct FlashGeometry {
  int T, C, NH;
  float scale;
  int NKV, W;

  __host__ __device__ int group() const { return NH / NKV; }  // query heads per key/value head
  // The first column of query head h's q, and of key/value head kvh's k and v, in a qkv row.
  __host__ __device__ int q_col(int h, int hs) const { return h * hs; }
  __host__ __device__ int k_col(int kvh, int hs) const { return C + kvh * hs; }
  __host__ __device__ int v_col(int kvh, int hs) const { return C + (NKV + kvh) * hs; }
};

inline FlashGeometry flash_geometry(int T, int NH, int NKV, int hs) {
  return FlashGeometry{
      T, NH * hs, NH, static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))), NKV, (NH + 2 * NKV) * hs};
}

// Whether the tensor-core kernels serve head size hs on the current device: compiled for it (16,
// 32, 64, 128) and the device grants the shared memory they need. Their operands must also be
// 16-byte aligned (checked by the caller). False without a device.
bool tc_flash_supports(int hs);

// out [B, T, C] and lse [B, NH, T] from qkv, the probabilities taking `mask` (inactive: none).
void tc_flash_forward(cudaStream_t stream, __nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int hs,
                      const FlashGeometry& g, const MaskParams& mask);

// dqkv [B, T, W] (overwritten) from qkv, dout, lse and delta [B, NH, T] (each row's dout . out).
void tc_flash_backward(cudaStream_t stream, __nv_bfloat16* dqkv, const __nv_bfloat16* qkv, const __nv_bfloat16* dout,
                       const float* lse, const float* delta, int B, int hs, const FlashGeometry& g,
                       const MaskParams& mask);

}  // namespace zt::cuda::detail
