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

// One element's update; both kernels below call it, so their bits are the same.
__device__ __forceinline__ void update(float& p, float g_raw, float& m, float& v, const AdamWCoeffs& k,
                                       float grad_scale) {
  const float g = __fmul_rn(g_raw, grad_scale);
  const float decayed = __fmul_rn(p, k.decay);
  const float mi = __fadd_rn(m, __fmul_rn(k.one_minus_beta1, __fsub_rn(g, m)));
  const float vi = __fadd_rn(__fmul_rn(v, k.beta2), __fmul_rn(__fmul_rn(k.one_minus_beta2, g), g));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
  p = __fsub_rn(decayed, __fdiv_rn(__fmul_rn(k.step_size, mi), denom));
  m = mi;
  v = vi;
}

__device__ __forceinline__ float load(const float* g, std::int64_t i) { return g[i]; }
__device__ __forceinline__ float load(const std::uint16_t* g, std::int64_t i) { return detail::bf16_to_f32(g[i]); }
__device__ __forceinline__ void store(NoWorkingCopy*, std::int64_t, float) {}
__device__ __forceinline__ void store(float* w, std::int64_t i, float p) { w[i] = p; }
__device__ __forceinline__ void store(std::uint16_t* w, std::int64_t i, float p) { w[i] = detail::f32_to_bf16(p); }

// Four consecutive elements from index 4 * q: one 16-byte access for fp32, 8 bytes for bf16.
__device__ __forceinline__ float4 load4(const float* g, std::int64_t q) { return reinterpret_cast<const float4*>(g)[q]; }
__device__ __forceinline__ float4 load4(const std::uint16_t* g, std::int64_t q) {
  const uint2 u = reinterpret_cast<const uint2*>(g)[q];  // little-endian: element 0 in the low half
  return make_float4(detail::bf16_to_f32(static_cast<std::uint16_t>(u.x & 0xffffu)),
                     detail::bf16_to_f32(static_cast<std::uint16_t>(u.x >> 16)),
                     detail::bf16_to_f32(static_cast<std::uint16_t>(u.y & 0xffffu)),
                     detail::bf16_to_f32(static_cast<std::uint16_t>(u.y >> 16)));
}
__device__ __forceinline__ void store4(NoWorkingCopy*, std::int64_t, float4) {}
__device__ __forceinline__ void store4(float* w, std::int64_t q, float4 p) { reinterpret_cast<float4*>(w)[q] = p; }
__device__ __forceinline__ void store4(std::uint16_t* w, std::int64_t q, float4 p) {
  const unsigned lo = detail::f32_to_bf16(p.x) | (static_cast<unsigned>(detail::f32_to_bf16(p.y)) << 16);
  const unsigned hi = detail::f32_to_bf16(p.z) | (static_cast<unsigned>(detail::f32_to_bf16(p.w)) << 16);
  reinterpret_cast<uint2*>(w)[q] = make_uint2(lo, hi);
}

template <typename G, typename W>
__global__ void adamw_kernel(float* param, const G* grad, float* m, float* v, W* working, std::int64_t n,
                             AdamWCoeffs k, float grad_scale) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x) {
    float p = param[i], mi = m[i], vi = v[i];
    update(p, load(grad, i), mi, vi, k, grad_scale);
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
    store(working, i, p);
  }
}

// The same update on n4 groups of four (memory-bound: 16-byte loads and stores where aligned).
template <typename G, typename W>
__global__ void adamw_kernel_vec4(float* param, const G* grad, float* m, float* v, W* working, std::int64_t n4,
                                  AdamWCoeffs k, float grad_scale) {
  for (std::int64_t q = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; q < n4; q += std::int64_t{gridDim.x} * blockDim.x) {
    float4 p = reinterpret_cast<float4*>(param)[q], mq = reinterpret_cast<float4*>(m)[q],
           vq = reinterpret_cast<float4*>(v)[q];
    const float4 g = load4(grad, q);
    update(p.x, g.x, mq.x, vq.x, k, grad_scale);
    update(p.y, g.y, mq.y, vq.y, k, grad_scale);
    update(p.z, g.z, mq.z, vq.z, k, grad_scale);
    update(p.w, g.w, mq.w, vq.w, k, grad_scale);
    reinterpret_cast<float4*>(m)[q] = mq;
    reinterpret_cast<float4*>(v)[q] = vq;
    reinterpret_cast<float4*>(param)[q] = p;
    store4(working, q, p);
  }
}

bool aligned(const void* p, std::uintptr_t bytes) { return (reinterpret_cast<std::uintptr_t>(p) % bytes) == 0; }

template <typename G, typename W>
void launch(cudaStream_t stream, float* param, const G* grad, float* m, float* v, W* working, std::int64_t n,
            const AdamWCoeffs& k, float grad_scale) {
  // Groups of four where every operand's group start is aligned for its vector width (a shard
  // slice of a parameter may start anywhere); the tail, or everything, element by element.
  const bool vec = aligned(param, 16) && aligned(m, 16) && aligned(v, 16) && aligned(grad, 4 * sizeof(G)) &&
                   (working == nullptr || aligned(working, 4 * sizeof(W)));
  const std::int64_t n4 = vec ? n / 4 : 0;
  if (n4 > 0) {
    adamw_kernel_vec4<<<detail::grid_for(n4, kThreads), kThreads, 0, stream>>>(param, grad, m, v, working, n4, k,
                                                                                grad_scale);
    ZT_CUDA_CHECK_LAUNCH();
  }
  const std::int64_t done = 4 * n4;
  if (done < n) {
    adamw_kernel<<<detail::grid_for(n - done, kThreads), kThreads, 0, stream>>>(
        param + done, grad + done, m + done, v + done, working == nullptr ? working : working + done, n - done, k,
        grad_scale);
    ZT_CUDA_CHECK_LAUNCH();
  }
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
