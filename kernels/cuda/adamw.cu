// AdamW on the GPU: one fused element-wise kernel (read g, p, m, v; write p, m, v and the working
// copy). The per-step scalars are formed on the host exactly as the CPU kernel forms them, and
// every operation is written with an explicit rounding intrinsic (__fmul_rn, ...) so nvcc cannot
// contract it into an FMA: the CPU (ISO C++, no contraction) and GPU updates are then bitwise equal.
#include "kernels/cuda/adamw.h"


#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kThreads = 256;

using cpu::AdamWCoeffs;

struct NoWorkingCopy {};

__device__ __forceinline__ float load(const float* g, std::int64_t i) { return g[i]; }
__device__ __forceinline__ float load(const std::uint16_t* g, std::int64_t i) { return detail::bf16_to_f32(g[i]); }
__device__ __forceinline__ void store(NoWorkingCopy*, std::int64_t, float) {}
__device__ __forceinline__ void store(float* w, std::int64_t i, float p) { w[i] = p; }
__device__ __forceinline__ void store(std::uint16_t* w, std::int64_t i, float p) { w[i] = detail::f32_to_bf16(p); }

template <typename G, typename W>
__global__ void adamw_kernel(float* param, const G* grad, float* m, float* v, W* working, std::int64_t n,
                             AdamWCoeffs k, float grad_scale) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x) {
    const float g = __fmul_rn(load(grad, i), grad_scale);
    float p = __fmul_rn(param[i], k.decay);
    const float mi = __fadd_rn(m[i], __fmul_rn(k.one_minus_beta1, __fsub_rn(g, m[i])));
    const float vi = __fadd_rn(__fmul_rn(v[i], k.beta2), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
    p = __fsub_rn(p, __fdiv_rn(__fmul_rn(k.step_size, mi), denom));
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
    store(working, i, p);
  }
}

template <typename G, typename W>
void launch(cudaStream_t stream, float* param, const G* grad, float* m, float* v, W* working, std::int64_t n,
            const AdamWCoeffs& k, float grad_scale) {
  adamw_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(param, grad, m, v, working, n, k, grad_scale);
  ZT_CUDA_CHECK_LAUNCH();
}

template <typename G>
void dispatch_working(cudaStream_t stream, float* param, const G* grad, float* m, float* v, TensorView working,
                      std::int64_t n, const AdamWCoeffs& k, float grad_scale) {
  if (working.data == nullptr) {
    launch(stream, param, grad, m, v, static_cast<NoWorkingCopy*>(nullptr), n, k, grad_scale);
  } else if (working.dtype == DType::kF32) {
    launch(stream, param, grad, m, v, working.as<float>(), n, k, grad_scale);
  } else {
    launch(stream, param, grad, m, v, static_cast<std::uint16_t*>(working.data), n, k, grad_scale);
  }
}

}  // namespace

void adamw_update(const ExecContext& ctx, TensorView param, TensorView grad, TensorView m, TensorView v,
                  TensorView working_out, const AdamWHyper& hyper, int step, float grad_scale) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const std::int64_t n = param.numel();
  detail::check_on_gpu(param, "param");
  detail::check_on_gpu(grad, "grad");
  detail::check_on_gpu(m, "m");
  detail::check_on_gpu(v, "v");
  detail::check_on_gpu(working_out, "working_out");
  ZT_CHECK(param.dtype == DType::kF32 && m.dtype == DType::kF32 && v.dtype == DType::kF32,
           "param, m and v must be F32");
  ZT_CHECK(grad.dtype == DType::kF32 || grad.dtype == DType::kBF16, "grad must be F32 or BF16, is {}",
           dtype_name(grad.dtype));
  ZT_CHECK(grad.numel() == n && m.numel() == n && v.numel() == n,
           "adamw: lengths differ (param {}, grad {}, m {}, v {})", n, grad.numel(), m.numel(), v.numel());
  if (working_out.data != nullptr) {
    ZT_CHECK(working_out.dtype == DType::kF32 || working_out.dtype == DType::kBF16, "working_out must be F32 or BF16");
    ZT_CHECK(working_out.numel() == n, "working_out has {} elements, param {}", working_out.numel(), n);
  }
  ZT_CHECK(step >= 1, "AdamW step is 1-based, got {}", step);
  if (n == 0) return;

  const AdamWCoeffs k = cpu::adamw_coeffs(hyper, step);  // the CPU's scalars, bit for bit

  if (grad.dtype == DType::kF32) {
    dispatch_working(stream, param.as<float>(), grad.as<float>(), m.as<float>(), v.as<float>(), working_out, n, k,
                     grad_scale);
  } else {
    dispatch_working(stream, param.as<float>(), static_cast<const std::uint16_t*>(grad.data), m.as<float>(),
                     v.as<float>(), working_out, n, k, grad_scale);
  }
}

}  // namespace zt::cuda
