// Internal to kernels/cuda/flash_attention.cu: the tensor-core (bf16 WMMA) flash attention kernels
// for BF16 activations. Same contract as the CUDA-core kernels there (flash_attention.h), with the
// products P V, dS K, dS Q and P^T dO taking bf16 operands: P and dS are rounded once to bf16
// before their product (FlashAttention-2's choice), everything else as docs/precision.md says.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/dropout_mask.cuh"

namespace zt::cuda::detail {

// One attention problem: qkv [B, T, 3C], out/dout [B, T, C], NH heads of hs = C / NH columns,
// scale = 1 / sqrt(hs).
struct FlashGeometry {
  int T, C, NH;
  float scale;
};

// Whether the tensor-core kernels serve head size hs on the current device: compiled for it (16,
// 32, 64, 128) and the device grants the shared memory they need. Their operands must also be
// 16-byte aligned (checked by the caller). False without a device.
bool tc_flash_supports(int hs);

// out [B, T, C] and lse [B, NH, T] from qkv, the probabilities taking `mask` (inactive: none).
void tc_flash_forward(cudaStream_t stream, __nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv, int B, int hs,
                      const FlashGeometry& g, const MaskParams& mask);

// dqkv [B, T, 3C] (overwritten) from qkv, dout, lse and delta [B, NH, T] (each row's dout . out).
void tc_flash_backward(cudaStream_t stream, __nv_bfloat16* dqkv, const __nv_bfloat16* qkv, const __nv_bfloat16* dout,
                       const float* lse, const float* delta, int B, int hs, const FlashGeometry& g,
                       const MaskParams& mask);

}  // namespace zt::cuda::detail
