// Stand-in for <cuda_runtime.h> under the SIMT emulator (tests/emulation/simt_runtime.h): the
// qualifiers vanish (__shared__ arrays become function statics: blocks run one at a time), built-in
// vector types and intrinsics become plain functions, and the
// synchronisation intrinsics map to the emulator's barriers.
#pragma once

#include <math.h>

#include <bit>
#include <cstdint>

#include "tests/emulation/simt_runtime.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // one array per kernel instantiation, shared by the block's threads
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

using cudaStream_t = struct CUstream_st*;

// Built-in vector types, with the CUDA alignment a vector access needs.
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

inline unsigned __umulhi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<std::uint64_t>(a) * b) >> 32);
}
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
// IEEE single operations rounded to nearest: plain C++ arithmetic, which this ISO C++ build does
// not contract into FMAs (the CPU kernels rely on the same).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

inline void __syncthreads() { simt::sync_block(); }
inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) { simt::sync_warp(); }
// Only the full-warp form the kernels use.
template <typename T>
T __shfl_xor_sync(unsigned /*mask*/, T v, int lane_mask) {
  return simt::shuffle_xor(v, lane_mask);
}
