// GELU kernels on the GPU, device code only (launched by gelu.cu; run on the CPU by the SIMT
// emulation tests, tests/emulation/): the CPU's formulation (x * sigmoid(2a), sigmoid formed from
// e = exp(-2|a|) so neither side cancels) with expf (~2 ulp) instead of the CPU's polynomial
// (~1 ulp): results agree to a few ulp, not bitwise (with bf16 activations, to a bf16 rounding).
// Memory-bound: 16-byte vector accesses (4 floats, or 8 bf16 values) for the aligned bulk.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_helpers.cuh"

namespace zt::cuda::detail::gelu {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubicCoeff = 0.044715f;
constexpr int kThreads = 256;

struct SigmoidPair {
  float s, one_minus_s;
};

__device__ __forceinline__ SigmoidPair gelu_sigmoid(float x) {
  const float a = kSqrt2OverPi * (x + kCubicCoeff * x * x * x);
  const float e = expf(-2.0f * fabsf(a));
  const float big = 1.0f / (1.0f + e);
  const float small = e * big;
  return a < 0.0f ? SigmoidPair{small, big} : SigmoidPair{big, small};
}

__device__ __forceinline__ float gelu(float x) { return x * gelu_sigmoid(x).s; }

__device__ __forceinline__ float gelu_grad(float x, float g) {
  const SigmoidPair sp = gelu_sigmoid(x);
  const float da_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubicCoeff * x * x);
  return g * (sp.s + 2.0f * x * sp.s * sp.one_minus_s * da_dx);
}

// Elements [0, kVec * (n / kVec)) as kVec-element vector accesses (the launcher takes kVec > 1 only
// where every pointer is aligned16), then the rest one by one; one launch for both. T is the
// activation storage type (float or bf16: widened on load, rounded once on store).
template <typename T, int kVec>
__global__ void gelu_forward_kernel(T* out, const T* inp, std::int64_t n) {
  using Vec = detail::ActVec<T, kVec>;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const std::int64_t start = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  const std::int64_t groups = n / kVec;
  for (std::int64_t i = start; i < groups; i += stride) {
    Vec x = Vec::load(inp + kVec * i);
#pragma unroll
    for (int k = 0; k < kVec; ++k) x[k] = gelu(x[k]);
    x.store(out + kVec * i);
  }
  for (std::int64_t i = kVec * groups + start; i < n; i += stride) {
    detail::store_act(out + i, gelu(detail::load_act(inp + i)));
  }
}

template <typename T, int kVec>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, std::int64_t n) {
  using Vec = detail::ActVec<T, kVec>;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const std::int64_t start = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  const std::int64_t groups = n / kVec;
  for (std::int64_t i = start; i < groups; i += stride) {
    const Vec x = Vec::load(inp + kVec * i);
    Vec g = Vec::load(dout + kVec * i);
#pragma unroll
    for (int k = 0; k < kVec; ++k) g[k] = gelu_grad(x[k], g[k]);
    g.store(dinp + kVec * i);
  }
  for (std::int64_t i = kVec * groups + start; i < n; i += stride) {
    detail::store_act(dinp + i, gelu_grad(detail::load_act(inp + i), detail::load_act(dout + i)));
  }
}

}  // namespace zt::cuda::detail::gelu
