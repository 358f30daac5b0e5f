// SwiGLU kernels on the GPU, device code only (launched by swiglu.cu; run on the CPU by the SIMT
// emulation tests): a thread per group of kVec output columns of a row (H % kVec == 0 for the
// 16-byte groups the launcher picks where the operands are aligned, else single elements), the
// gate in columns [0, H) and the up in [H, 2H) of each gate_up row. Formulas as the CPU's
// (kernels/cpu/swiglu.h), in fp32 with expf; each activation result rounded once.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::swiglu {

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

template <typename T, int kVec>
__global__ void swiglu_forward_kernel(T* out, const T* gate_up, std::int64_t N, int H) {
  using Vec = detail::ActVec<T, kVec>;
  const std::int64_t groups = N * (H / kVec), stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < groups; i += stride) {
    const std::int64_t n = i / (H / kVec);
    const int h = static_cast<int>(i % (H / kVec)) * kVec;
    const Vec g = Vec::load(gate_up + n * 2 * H + h), u = Vec::load(gate_up + n * 2 * H + H + h);
    Vec o;
#pragma unroll
    for (int k = 0; k < kVec; ++k) o[k] = g[k] * sigmoid(g[k]) * u[k];
    o.store(out + n * H + h);
  }
}

template <typename T, int kVec>
__global__ void swiglu_backward_kernel(T* dgate_up, const T* gate_up, const T* dout, std::int64_t N, int H) {
  using Vec = detail::ActVec<T, kVec>;
  const std::int64_t groups = N * (H / kVec), stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < groups; i += stride) {
    const std::int64_t n = i / (H / kVec);
    const int h = static_cast<int>(i % (H / kVec)) * kVec;
    // Both loads before either store: dgate_up may alias gate_up.
    const Vec g = Vec::load(gate_up + n * 2 * H + h), u = Vec::load(gate_up + n * 2 * H + H + h);
    const Vec go = Vec::load(dout + n * H + h);
    Vec dg, du;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float s = sigmoid(g[k]);
      dg[k] = go[k] * u[k] * s * (1.0f + g[k] * (1.0f - s));
      du[k] = go[k] * g[k] * s;
    }
    dg.store(dgate_up + n * 2 * H + h);
    du.store(dgate_up + n * 2 * H + H + h);
  }
}

}  // namespace zt::cuda::detail::swiglu
