// Internal to the CUDA kernels: the block's dynamic shared memory, behind a function so that the
// SIMT emulator (tests/emulation/simt) can stand in for it.
#pragma once

#include <cuda_runtime.h>

namespace zt::cuda::detail {

// The block's dynamic shared memory (the bytes given at launch), 128-byte aligned.
__device__ __forceinline__ unsigned char* dynamic_shared_memory() {
  extern __shared__ __align__(128) unsigned char dynamic_smem[];
  return dynamic_smem;
}

}  // namespace zt::cuda::detail
