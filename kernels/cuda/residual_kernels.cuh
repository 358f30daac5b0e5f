// Element-wise add kernels on the GPU, device code only (launched by residual.cu; run on the CPU by
// the SIMT emulation tests, tests/emulation/), memory-bound: 4-element vector accesses when every
// pointer is aligned to them, scalar otherwise. Each element is one rounding (the fp32 add, then
// for bf16 activations the round to bf16), so results equal the CPU's bit for bit.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::residual {

constexpr int kThreads = 256;

// out = a + b element by element, storage type T (float or bf16: one rounding of the fp32 sum).
template <typename T>
__global__ void add_scalar(T* out, const T* a, const T* b, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x)
    detail::store_act(out + i, detail::load_act(a + i) + detail::load_act(b + i));
}

// The same over groups of 4 elements, each one vector access (see detail::ActVec).
template <typename T>
__global__ void add_vec4(T* out, const T* a, const T* b, std::int64_t n4) {
  using Vec = detail::ActVec<T, 4>;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n4; i += std::int64_t{gridDim.x} * blockDim.x) {
    Vec x = Vec::load(a + 4 * i);
    const Vec y = Vec::load(b + 4 * i);
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] += y[k];
    x.store(out + 4 * i);
  }
}

__global__ void accumulate_bf16(std::uint16_t* dst, const float* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x)
    dst[i] = detail::f32_to_bf16(detail::bf16_to_f32(dst[i]) + src[i]);
}

}  // namespace zt::cuda::detail::residual
