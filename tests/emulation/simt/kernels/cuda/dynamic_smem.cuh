// Stand-in for kernels/cuda/dynamic_smem.cuh under the SIMT emulator: the running block's dynamic
// shared memory is the emulator's buffer (simt::run_blocks fills it before each block).
#pragma once

#include "tests/emulation/simt_runtime.h"

namespace zt::cuda::detail {

inline unsigned char* dynamic_shared_memory() { return simt::dynamic_smem(); }

}  // namespace zt::cuda::detail
