// Stand-in for kernels/cuda/common.cuh under the SIMT emulator: the helpers the emulated kernel
// headers use, the bf16 ones defined by the CPU's own rounding (engine/core/bf16.h), which the
// real ones match bit for bit.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "engine/core/bf16.h"

namespace zt::cuda::detail {

inline std::uint16_t f32_to_bf16(float f) { return float_to_bf16(f).bits; }

inline unsigned char* dynamic_shared_memory() { return simt::dynamic_smem(); }

inline float load_act(const float* p) { return *p; }
inline float load_act(const __nv_bfloat16* p) { return bf16_to_float(bf16{p->bits}); }
inline void store_act(float* p, float v) { *p = v; }
inline void store_act(__nv_bfloat16* p, float v) { p->bits = f32_to_bf16(v); }

}  // namespace zt::cuda::detail
