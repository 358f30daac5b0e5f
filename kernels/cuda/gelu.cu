// GELU on the GPU, the CPU's formulation (x * sigmoid(2a), sigmoid formed from e = exp(-2|a|) so
// neither side cancels) with expf (~2 ulp) instead of the CPU's polynomial (~1 ulp): results agree
// to a few ulp, not bitwise. Memory-bound: float4 accesses for the 16-byte aligned bulk.
#include "kernels/cuda/gelu.h"

#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

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

// Elements [0, 4 n4) as float4 when `vec`, then the rest one by one; one launch for both.
__global__ void gelu_forward_kernel(float* out, const float* inp, std::int64_t n, bool vec) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const std::int64_t start = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  const std::int64_t n4 = vec ? n / 4 : 0;
  for (std::int64_t i = start; i < n4; i += stride) {
    const float4 x = reinterpret_cast<const float4*>(inp)[i];
    reinterpret_cast<float4*>(out)[i] = make_float4(gelu(x.x), gelu(x.y), gelu(x.z), gelu(x.w));
  }
  for (std::int64_t i = 4 * n4 + start; i < n; i += stride) out[i] = gelu(inp[i]);
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, std::int64_t n, bool vec) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const std::int64_t start = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  const std::int64_t n4 = vec ? n / 4 : 0;
  for (std::int64_t i = start; i < n4; i += stride) {
    const float4 x = reinterpret_cast<const float4*>(inp)[i];
    const float4 g = reinterpret_cast<const float4*>(dout)[i];
    reinterpret_cast<float4*>(dinp)[i] =
        make_float4(gelu_grad(x.x, g.x), gelu_grad(x.y, g.y), gelu_grad(x.z, g.z), gelu_grad(x.w, g.w));
  }
  for (std::int64_t i = 4 * n4 + start; i < n; i += stride) dinp[i] = gelu_grad(inp[i], dout[i]);
}

}  // namespace

void gelu_forward(const ExecContext& ctx, TensorView out, TensorView inp) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(out, "out");
  detail::check_on_gpu(inp, "inp");
  ZT_CHECK(out.dtype == DType::kF32 && inp.dtype == DType::kF32, "gelu is fp32 only");
  ZT_CHECK(out.numel() == inp.numel(), "out has {} elements, inp {}", out.numel(), inp.numel());
  const std::int64_t n = inp.numel();
  if (n == 0) return;
  const bool vec = detail::aligned16(out.data) && detail::aligned16(inp.data);
  gelu_forward_kernel<<<detail::grid_for(vec ? (n + 3) / 4 : n, kThreads), kThreads, 0, stream>>>(
      out.as<float>(), inp.as<float>(), n, vec);
  ZT_CUDA_CHECK_LAUNCH();
}

void gelu_backward(const ExecContext& ctx, TensorView dinp, TensorView inp, TensorView dout) {
  const cudaStream_t stream = detail::stream_of(ctx);
  detail::check_on_gpu(dinp, "dinp");
  detail::check_on_gpu(inp, "inp");
  detail::check_on_gpu(dout, "dout");
  ZT_CHECK(dinp.dtype == DType::kF32 && inp.dtype == DType::kF32 && dout.dtype == DType::kF32, "gelu is fp32 only");
  ZT_CHECK(dinp.numel() == inp.numel() && dout.numel() == inp.numel(), "gelu_backward: element counts differ");
  const std::int64_t n = inp.numel();
  if (n == 0) return;
  const bool vec = detail::aligned16(dinp.data) && detail::aligned16(inp.data) && detail::aligned16(dout.data);
  gelu_backward_kernel<<<detail::grid_for(vec ? (n + 3) / 4 : n, kThreads), kThreads, 0, stream>>>(
      dinp.as<float>(), inp.as<float>(), dout.as<float>(), n, vec);
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
