// Stand-in for <cuda_bf16.h> under the SIMT emulator: the storage type and its bit casts.
#pragma once

#include <cstdint>

struct __nv_bfloat16 {
  std::uint16_t bits;
};
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16{u}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.bits; }
