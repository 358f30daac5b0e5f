// Causal attention on the GPU in the cuBLASLt form: per sample b, one strided-batched product over
// the heads (head h of q, k, v is a column block of qkv, so the batch stride is hs and no permute
// copy is needed), a fused causal softmax over whole rows (a warp per row), and the products of
// the backward likewise. The products are full T x T (the upper triangle is computed and then
// zeroed): simple and exact, at twice the minimum FLOPs; a flash-style fused kernel is the next
// step (docs/gpu_backend.md). Dropout on the probabilities draws cpu::attention_forward's mask
// (kernels/cuda/dropout.h) one sample at a time into scratch, so att keeps the undropped values.
#include "kernels/cuda/attention.h"

#include <cmath>

#include "kernels/cpu/attention.h"  // attention_dims: the operand checks both backends share
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/lt_gemm.h"

namespace zt::cuda {

namespace {

using detail::LtGemm;
using detail::run_gemm;

constexpr int kRowsPerBlock = 8;  // warps per softmax block, one row each

// att rows [rows = B * NH * T, T]: row r is query t = r % T. In place: scores -> probabilities,
// zero above the diagonal. Scores already carry the 1/sqrt(hs) scale (the GEMM's alpha).
__global__ void causal_softmax_forward(float* att, std::int64_t rows, int T) {
  const int lane = threadIdx.x % detail::kWarpSize;
  const std::int64_t r = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / detail::kWarpSize;
  if (r >= rows) return;
  const int len = static_cast<int>(r % T) + 1;
  float* row = att + r * T;
  float mx = -INFINITY;
  for (int k = lane; k < len; k += detail::kWarpSize) mx = fmaxf(mx, row[k]);
  mx = detail::warp_max(mx);
  float sum = 0.0f;
  for (int k = lane; k < len; k += detail::kWarpSize) sum += expf(row[k] - mx);
  const float inv_sum = 1.0f / detail::warp_sum(sum);
  for (int k = lane; k < T; k += detail::kWarpSize) row[k] = k < len ? expf(row[k] - mx) * inv_sum : 0.0f;
}

// dp rows (in place): dpreatt = att * (dp - sum_k att dp) * scale below and on the diagonal, 0 above.
__global__ void causal_softmax_backward(float* dp, const float* att, std::int64_t rows, int T, float scale) {
  const int lane = threadIdx.x % detail::kWarpSize;
  const std::int64_t r = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / detail::kWarpSize;
  if (r >= rows) return;
  const int len = static_cast<int>(r % T) + 1;
  float* d = dp + r * T;
  const float* p = att + r * T;
  float dot = 0.0f;
  for (int k = lane; k < len; k += detail::kWarpSize) dot += p[k] * d[k];
  dot = detail::warp_sum(dot);
  for (int k = lane; k < T; k += detail::kWarpSize) d[k] = k < len ? p[k] * (d[k] - dot) * scale : 0.0f;
}

using AttnDims = cpu::AttentionDims;

AttnDims check_dims(const TensorView& out_like, const TensorView& att, const TensorView& qkv, int n_head) {
  for (const TensorView* v : {&out_like, &att, &qkv}) detail::check_on_gpu(*v, "attention operand");
  return cpu::attention_dims(out_like, att, qkv, n_head);
}

// dst = src * sample b's dropout mask over [n_head, T, T] (scaled by 1 / (1 - p); dst may be src):
// the whole sample is one row of the mask, element j = (h * T + t) * T + t2, as
// cpu::attention_forward draws it. The forward drops the probabilities with it, the backward
// their gradient.
void apply_sample_mask(const ExecContext& ctx, float* dst, const float* src, const AttnDims& d, std::int64_t b,
                       const DropoutSpec& dropout) {
  const Shape one_sample{1, d.NH * d.T * d.T};
  DropoutSpec spec = dropout;
  spec.first_sample += b;
  // Qualified: ADL on DropoutSpec also finds cpu::dropout_forward.
  cuda::dropout_forward(ctx, TensorView{dst, DType::kF32, Device::kCUDA, one_sample},
                        TensorView{const_cast<float*>(src), DType::kF32, Device::kCUDA, one_sample}, spec);
}

// A product batched over the heads of one sample; A/B/D offsets and leading dimensions per call.
LtGemm head_batch(const AttnDims& d) {
  LtGemm g;
  g.batch_count = static_cast<int>(d.NH);
  return g;
}

}  // namespace

void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                       const DropoutSpec& dropout) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const AttnDims d = check_dims(out, att, qkv, n_head);
  if (d.B * d.T == 0) return;
  const std::int64_t T = d.T, C = d.C, C3 = 3 * d.C, hs = d.hs;
  const float* qkv_p = qkv.as<float>();
  float* att_p = att.as<float>();
  float* out_p = out.as<float>();
  // With dropout, att keeps the probabilities (backward needs them) and one sample at a time is
  // dropped into scratch for the product with v.
  Buffer dropped = dropout.active() ? detail::resources_of(ctx).scratch(DType::kF32, d.NH * T * T) : Buffer{};
  for (std::int64_t b = 0; b < d.B; ++b) {
    // att^T[k, q] (column-major) = K[k, :] . Q[q, :] * scale: A = K (transposed), B = Q.
    LtGemm g = head_batch(d);
    g.trans_a = true;
    g.m = T, g.n = T, g.k = hs;
    g.A = qkv_p + b * T * C3 + C, g.lda = C3, g.stride_a = hs;
    g.B = qkv_p + b * T * C3, g.ldb = C3, g.stride_b = hs;
    g.D = att_p + b * d.NH * T * T, g.ldd = T, g.stride_d = T * T;
    g.alpha = 1.0f / std::sqrt(static_cast<float>(hs));
    run_gemm(ctx, g);
  }
  const std::int64_t rows = d.B * d.NH * T;
  causal_softmax_forward<<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock),
                           kRowsPerBlock * detail::kWarpSize, 0, stream>>>(att_p, rows, static_cast<int>(T));
  ZT_CUDA_CHECK_LAUNCH();
  for (std::int64_t b = 0; b < d.B; ++b) {
    const float* probs = att_p + b * d.NH * T * T;
    if (dropout.active()) {
      apply_sample_mask(ctx, dropped.as<float>(), probs, d, b, dropout);
      probs = dropped.as<float>();
    }
    // out^T[e, q] = V^T[e, k] @ P^T[k, q]: A = V (column-major [hs, T]), B = att (column-major [k, q]).
    LtGemm g = head_batch(d);
    g.m = hs, g.n = T, g.k = T;
    g.A = qkv_p + b * T * C3 + 2 * C, g.lda = C3, g.stride_a = hs;
    g.B = probs, g.ldb = T, g.stride_b = T * T;
    g.D = out_p + b * T * C, g.ldd = C, g.stride_d = hs;
    run_gemm(ctx, g);
  }
}

void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head, const DropoutSpec& dropout) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const AttnDims d = check_dims(dout, att, qkv, n_head);
  detail::check_on_gpu(dqkv, "dqkv");
  ZT_CHECK(dqkv.dtype == DType::kF32 && dqkv.numel() == qkv.numel(), "dqkv must be F32 shaped as qkv");
  if (d.B * d.T == 0) return;
  const std::int64_t T = d.T, C = d.C, C3 = 3 * d.C, hs = d.hs;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const float* qkv_p = qkv.as<float>();
  const float* att_p = att.as<float>();
  const float* dout_p = dout.as<float>();
  float* dqkv_p = dqkv.as<float>();
  Buffer dp_buf = detail::resources_of(ctx).scratch(DType::kF32, d.NH * T * T);  // one sample at a time
  float* dp = dp_buf.as<float>();
  Buffer dropped = dropout.active() ? detail::resources_of(ctx).scratch(DType::kF32, d.NH * T * T) : Buffer{};
  const std::int64_t rows = d.NH * T;
  for (std::int64_t b = 0; b < d.B; ++b) {
    const float* q = qkv_p + b * T * C3;
    const float* k = q + C;
    const float* v = q + 2 * C;
    const float* p = att_p + b * d.NH * T * T;
    const float* dO = dout_p + b * T * C;
    float* dq = dqkv_p + b * T * C3;
    // The forward multiplied v by the dropped probabilities M * P: dV uses them, and
    // d(M * P) = dO v^T becomes dP = M * d(M * P) before the softmax backward (which uses P).
    const float* pv = p;
    if (dropout.active()) {
      apply_sample_mask(ctx, dropped.as<float>(), p, d, b, dropout);
      pv = dropped.as<float>();
    }
    {  // dV^T[e, k] = dO^T[e, q] @ P[q, k]: A = dO, B = att transposed.
      LtGemm g = head_batch(d);
      g.trans_b = true;
      g.m = hs, g.n = T, g.k = T;
      g.A = dO, g.lda = C, g.stride_a = hs;
      g.B = pv, g.ldb = T, g.stride_b = T * T;
      g.D = dq + 2 * C, g.ldd = C3, g.stride_d = hs;
      run_gemm(ctx, g);
    }
    {  // dP^T[k, q] = V[k, :] . dO[q, :]: A = V transposed, B = dO.
      LtGemm g = head_batch(d);
      g.trans_a = true;
      g.m = T, g.n = T, g.k = hs;
      g.A = v, g.lda = C3, g.stride_a = hs;
      g.B = dO, g.ldb = C, g.stride_b = hs;
      g.D = dp, g.ldd = T, g.stride_d = T * T;
      run_gemm(ctx, g);
    }
    if (dropout.active()) apply_sample_mask(ctx, dp, dp, d, b, dropout);
    causal_softmax_backward<<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock),
                              kRowsPerBlock * detail::kWarpSize, 0, stream>>>(dp, p, rows, static_cast<int>(T), scale);
    ZT_CUDA_CHECK_LAUNCH();
    {  // dQ^T[e, q] = K^T[e, k] @ dpre^T[k, q]: A = K, B = dpre (column-major [k, q]).
      LtGemm g = head_batch(d);
      g.m = hs, g.n = T, g.k = T;
      g.A = k, g.lda = C3, g.stride_a = hs;
      g.B = dp, g.ldb = T, g.stride_b = T * T;
      g.D = dq, g.ldd = C3, g.stride_d = hs;
      run_gemm(ctx, g);
    }
    {  // dK^T[e, k] = Q^T[e, q] @ dpre[q, k]: A = Q, B = dpre transposed.
      LtGemm g = head_batch(d);
      g.trans_b = true;
      g.m = hs, g.n = T, g.k = T;
      g.A = q, g.lda = C3, g.stride_a = hs;
      g.B = dp, g.ldb = T, g.stride_b = T * T;
      g.D = dq + C, g.ldd = C3, g.stride_d = hs;
      run_gemm(ctx, g);
    }
  }
}

}  // namespace zt::cuda
