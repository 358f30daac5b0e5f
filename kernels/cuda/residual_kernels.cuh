// Element-wise add kernels on the GPU, device code only (launched by residual.cu; run on the CPU by
// the SIMT emulation tests, tests/emulation/), memory-bound: 16-byte vector accesses (4 floats, 8 bf16)
// when every pointer is aligned to them, scalar otherwise. Each element is one rounding (the fp32 add, then
// for bf16 activations the round to bf16), so results equal the CPU's bit for bit.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::residual {

constexpr int kThreads = 256;

// out = a + b element by element over `groups` groups of kVec elements, each one vector access
// (see detail::ActVec; kVec = 1: single elements, the unaligned case and the tail). T is the
// storage type (float or bf16: one rounding of the fp32 sum).
template <typename T, int kVec>
__global__ void add_vec(T* out, const T* a, const T* b, std::int64_t groups) {
  using Vec = detail::ActVec<T, kVec>;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < groups;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    Vec x = Vec::load(a + kVec * i);
    const Vec y = Vec::load(b + kVec * i);
#pragma unroll
    for (int k = 0; k < kVec; ++k) x[k] += y[k];
    x.store(out + kVec * i);
  }
}

// x *= factor element by element (fp32, one rounding each).
__global__ void scale_f32(float* x, float factor, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] *= factor;
}

// dst (bf16) = round(widen(dst) + src) element by element, kVec at a time (8: one 16-byte bf16
// access and two float4 loads; 1: the unaligned case and the tail).
template <int kVec>
__global__ void accumulate_bf16(__nv_bfloat16* dst, const float* src, std::int64_t groups) {
  using Vec = detail::ActVec<__nv_bfloat16, kVec>;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < groups;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    Vec d = Vec::load(dst + kVec * i);
    const detail::FloatVec<kVec> s = detail::FloatVec<kVec>::load(src + kVec * i);
#pragma unroll
    for (int k = 0; k < kVec; ++k) d[k] += s[k];
    d.store(dst + kVec * i);
  }
}

}  // namespace zt::cuda::detail::residual
