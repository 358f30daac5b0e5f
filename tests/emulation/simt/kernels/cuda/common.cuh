// Stand-in for kernels/cuda/common.cuh under the SIMT emulator: the one helper the emulated kernel
// headers use, defined by the CPU's own rounding (engine/core/bf16.h), which the real one matches
// bit for bit.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "engine/core/bf16.h"

namespace zt::cuda::detail {

inline std::uint16_t f32_to_bf16(float f) { return float_to_bf16(f).bits; }

}  // namespace zt::cuda::detail
