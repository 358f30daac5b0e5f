// Causal attention on the GPU in the cuBLASLt form: per sample b, one strided-batched product over
// the heads (head h of q, k, v is a column block of qkv, so the batch stride is hs and no permute
// copy is needed), a fused causal softmax over whole rows (a warp per row), and the products of
// the backward likewise. The products are full T x T (the upper triangle is computed and then
// zeroed): simple and exact, at twice the minimum FLOPs; a flash-style fused kernel is the next
// step (docs/gpu_backend.md). Dropout on the probabilities draws cpu::attention_forward's mask
// (kernels/cuda/dropout.h) one sample at a time into scratch, so att keeps the undropped values.
// One body serves F32 and BF16 activations (docs/precision.md), templated on the storage type;
// [Note: bf16 attention] says where a BF16 run keeps fp32 and where it rounds.
#include "kernels/cuda/attention.h"

#include <cmath>
#include <type_traits>

#include "kernels/contracts/operand_checks.h"  // attention_dims: the operand checks both backends share
#include "kernels/cuda/attention_kernels.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/lt_gemm.h"

namespace zt::cuda {

namespace {

using detail::LtGemm;
using detail::run_gemm;

// [Note: bf16 attention]
// With BF16 qkv/att/out the products run on bf16 operands with fp32 accumulation, and fp32 is kept
// where a rounding would cost accuracy that the contract does not spend: the scores q k^T go to an
// fp32 scratch of one sample, which the softmax reads and rounds once into att (bf16 probabilities);
// the backward's dP = dO v^T goes to fp32 scratch too, and the softmax backward reads it with the
// bf16 probabilities. Two operands are bf16 only because cuBLASLt multiplies A and B of one type:
// P @ V (and dV = P^T dO) reads att, the rounded probabilities (dropped in bf16 with dropout), and
// dQ, dK read the softmax backward's result rounded to bf16 scratch. Each is one extra rounding of
// an operand (at most 2^-8 relative), which the CPU reference (fp32 staging) does not make; the tests
// bound the difference normwise. Every stored result (att, out, dqkv) is rounded once.

template <typename Act>
constexpr cudaDataType_t lt_type() {
  return std::is_same_v<Act, float> ? CUDA_R_32F : CUDA_R_16BF;
}

using detail::attention::causal_softmax_backward;
using detail::attention::causal_softmax_forward;

unsigned softmax_blocks(std::int64_t rows) {
  constexpr int kRows = detail::attention::kRowsPerBlock;
  return static_cast<unsigned>((rows + kRows - 1) / kRows);
}
constexpr unsigned kSoftmaxThreads = detail::attention::kThreads;

using AttnDims = AttentionDims;

AttnDims check_dims(const TensorView& out_like, const TensorView& att, const TensorView& qkv, int n_head) {
  for (const TensorView* v : {&out_like, &att, &qkv}) detail::check_on_gpu(*v, "attention operand");
  return attention_dims(out_like, att, qkv, n_head);
}

// dst = src * sample b's dropout mask over [n_head, T, T] (scaled by 1 / (1 - p); dst may be src;
// both of `dtype`): the whole sample is one row of the mask, element j = (h * T + t) * T + t2, as
// cpu::attention_forward draws it. The forward drops the probabilities with it, the backward
// their gradient.
void apply_sample_mask(const ExecContext& ctx, void* dst, const void* src, DType dtype, const AttnDims& d,
                       std::int64_t b, const DropoutSpec& dropout) {
  const Shape one_sample{1, d.NH * d.T * d.T};
  DropoutSpec spec = dropout;
  spec.first_sample += b;
  // Qualified: ADL on DropoutSpec also finds cpu::dropout_forward.
  cuda::dropout_forward(ctx, TensorView{dst, dtype, Device::kCUDA, one_sample},
                        TensorView{const_cast<void*>(src), dtype, Device::kCUDA, one_sample}, spec);
}

// A product batched over the heads of one sample, on operands of storage type Act; A/B/D offsets,
// leading dimensions and D's type per call.
template <typename Act>
LtGemm head_batch(const AttnDims& d) {
  LtGemm g;
  g.batch_count = static_cast<int>(d.NH);
  g.ab_type = g.d_type = lt_type<Act>();
  return g;
}

template <typename Act>
void forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, const AttnDims& d,
             const DropoutSpec& dropout) {
  constexpr bool kF32 = std::is_same_v<Act, float>;
  const cudaStream_t stream = detail::stream_of(ctx);
  KernelResources& res = detail::resources_of(ctx);
  const std::int64_t T = d.T, C = d.C, C3 = 3 * d.C, hs = d.hs, sample = d.NH * T * T;
  const Act* qkv_p = detail::act_data<Act>(qkv);
  Act* att_p = detail::act_data<Act>(att);
  Act* out_p = detail::act_data<Act>(out);
  // F32 scores land in att and one softmax runs over all samples; bf16 ones in fp32 scratch, one
  // sample at a time ([Note: bf16 attention]). kernel_scratch::attention_forward_bytes counts it.
  Buffer scores = kF32 ? Buffer{} : res.scratch(DType::kF32, sample);
  // With dropout, att keeps the probabilities (backward needs them) and one sample at a time is
  // dropped into scratch for the product with v.
  Buffer dropped = dropout.active() ? res.scratch(detail::act_dtype_of<Act>(), sample) : Buffer{};
  for (std::int64_t b = 0; b < d.B; ++b) {
    float* s;
    if constexpr (kF32) {
      s = att_p + b * sample;
    } else {
      s = scores.as<float>();
    }
    // att^T[k, q] (column-major) = K[k, :] . Q[q, :] * scale: A = K (transposed), B = Q.
    LtGemm g = head_batch<Act>(d);
    g.trans_a = true;
    g.m = T, g.n = T, g.k = hs;
    g.A = qkv_p + b * T * C3 + C, g.lda = C3, g.stride_a = hs;
    g.B = qkv_p + b * T * C3, g.ldb = C3, g.stride_b = hs;
    g.D = s, g.ldd = T, g.stride_d = T * T, g.d_type = CUDA_R_32F;
    g.alpha = 1.0f / std::sqrt(static_cast<float>(hs));
    run_gemm(ctx, g);
    if constexpr (!kF32) {
      causal_softmax_forward<<<softmax_blocks(d.NH * T), kSoftmaxThreads, 0, stream>>>(att_p + b * sample, s, d.NH * T,
                                                                                       static_cast<int>(T));
      ZT_CUDA_CHECK_LAUNCH();
    }
  }
  if constexpr (kF32) {
    const std::int64_t rows = d.B * d.NH * T;
    causal_softmax_forward<<<softmax_blocks(rows), kSoftmaxThreads, 0, stream>>>(att_p, att_p, rows,
                                                                                 static_cast<int>(T));
    ZT_CUDA_CHECK_LAUNCH();
  }
  for (std::int64_t b = 0; b < d.B; ++b) {
    const Act* probs = att_p + b * sample;
    if (dropout.active()) {
      apply_sample_mask(ctx, dropped.data(), probs, detail::act_dtype_of<Act>(), d, b, dropout);
      probs = static_cast<const Act*>(dropped.data());
    }
    // out^T[e, q] = V^T[e, k] @ P^T[k, q]: A = V (column-major [hs, T]), B = att (column-major [k, q]).
    LtGemm g = head_batch<Act>(d);
    g.m = hs, g.n = T, g.k = T;
    g.A = qkv_p + b * T * C3 + 2 * C, g.lda = C3, g.stride_a = hs;
    g.B = probs, g.ldb = T, g.stride_b = T * T;
    g.D = out_p + b * T * C, g.ldd = C, g.stride_d = hs;
    run_gemm(ctx, g);
  }
}

template <typename Act>
void backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
              const AttnDims& d, const DropoutSpec& dropout) {
  constexpr bool kF32 = std::is_same_v<Act, float>;
  const cudaStream_t stream = detail::stream_of(ctx);
  KernelResources& res = detail::resources_of(ctx);
  const std::int64_t T = d.T, C = d.C, C3 = 3 * d.C, hs = d.hs, sample = d.NH * T * T;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const Act* qkv_p = detail::act_data<Act>(qkv);
  const Act* att_p = detail::act_data<Act>(att);
  const Act* dout_p = detail::act_data<Act>(dout);
  Act* dqkv_p = detail::act_data<Act>(dqkv);
  // One sample at a time, fp32 for either dtype (kernel_scratch::attention_backward_bytes counts these).
  Buffer dp_buf = res.scratch(DType::kF32, sample);
  float* dp = dp_buf.as<float>();
  // The softmax backward's result, the B operand of dQ and dK: dp itself for F32 (in place), bf16
  // scratch for BF16 ([Note: bf16 attention]).
  Buffer dpre_buf = kF32 ? Buffer{} : res.scratch(DType::kBF16, sample);
  Act* dpre;
  if constexpr (kF32) {
    dpre = dp;
  } else {
    dpre = static_cast<Act*>(dpre_buf.data());
  }
  Buffer dropped = dropout.active() ? res.scratch(detail::act_dtype_of<Act>(), sample) : Buffer{};
  const std::int64_t rows = d.NH * T;
  for (std::int64_t b = 0; b < d.B; ++b) {
    const Act* q = qkv_p + b * T * C3;
    const Act* k = q + C;
    const Act* v = q + 2 * C;
    const Act* p = att_p + b * sample;
    const Act* dO = dout_p + b * T * C;
    Act* dq = dqkv_p + b * T * C3;
    // The forward multiplied v by the dropped probabilities M * P: dV uses them, and
    // d(M * P) = dO v^T becomes dP = M * d(M * P) before the softmax backward (which uses P).
    const Act* pv = p;
    if (dropout.active()) {
      apply_sample_mask(ctx, dropped.data(), p, detail::act_dtype_of<Act>(), d, b, dropout);
      pv = static_cast<const Act*>(dropped.data());
    }
    {  // dV^T[e, k] = dO^T[e, q] @ P[q, k]: A = dO, B = att transposed.
      LtGemm g = head_batch<Act>(d);
      g.trans_b = true;
      g.m = hs, g.n = T, g.k = T;
      g.A = dO, g.lda = C, g.stride_a = hs;
      g.B = pv, g.ldb = T, g.stride_b = T * T;
      g.D = dq + 2 * C, g.ldd = C3, g.stride_d = hs;
      run_gemm(ctx, g);
    }
    {  // dP^T[k, q] = V[k, :] . dO[q, :]: A = V transposed, B = dO; fp32 result.
      LtGemm g = head_batch<Act>(d);
      g.trans_a = true;
      g.m = T, g.n = T, g.k = hs;
      g.A = v, g.lda = C3, g.stride_a = hs;
      g.B = dO, g.ldb = C, g.stride_b = hs;
      g.D = dp, g.ldd = T, g.stride_d = T * T, g.d_type = CUDA_R_32F;
      run_gemm(ctx, g);
    }
    if (dropout.active()) apply_sample_mask(ctx, dp, dp, DType::kF32, d, b, dropout);
    causal_softmax_backward<<<softmax_blocks(rows), kSoftmaxThreads, 0, stream>>>(dpre, dp, p, rows,
                                                                                  static_cast<int>(T), scale);
    ZT_CUDA_CHECK_LAUNCH();
    {  // dQ^T[e, q] = K^T[e, k] @ dpre^T[k, q]: A = K, B = dpre (column-major [k, q]).
      LtGemm g = head_batch<Act>(d);
      g.m = hs, g.n = T, g.k = T;
      g.A = k, g.lda = C3, g.stride_a = hs;
      g.B = dpre, g.ldb = T, g.stride_b = T * T;
      g.D = dq, g.ldd = C3, g.stride_d = hs;
      run_gemm(ctx, g);
    }
    {  // dK^T[e, k] = Q^T[e, q] @ dpre[q, k]: A = Q, B = dpre transposed.
      LtGemm g = head_batch<Act>(d);
      g.trans_b = true;
      g.m = hs, g.n = T, g.k = T;
      g.A = q, g.lda = C3, g.stride_a = hs;
      g.B = dpre, g.ldb = T, g.stride_b = T * T;
      g.D = dq + C, g.ldd = C3, g.stride_d = hs;
      run_gemm(ctx, g);
    }
  }
}

}  // namespace

void attention_forward(const ExecContext& ctx, TensorView out, TensorView att, TensorView qkv, int n_head,
                       const DropoutSpec& dropout) {
  const DType dtype = detail::activation_dtype("attention_forward", {out, att, qkv});
  const AttnDims d = check_dims(out, att, qkv, n_head);
  if (d.B * d.T == 0) return;
  detail::dispatch_activation(dtype,
                              [&](auto act) { forward<typename decltype(act)::type>(ctx, out, att, qkv, d, dropout); });
}

void attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView qkv, TensorView att,
                        int n_head, const DropoutSpec& dropout) {
  const DType dtype = detail::activation_dtype("attention_backward", {dqkv, dout, qkv, att});
  const AttnDims d = check_dims(dout, att, qkv, n_head);
  detail::check_on_gpu(dqkv, "dqkv");
  ZT_CHECK(dqkv.numel() == qkv.numel(), "attention_backward: dqkv must be shaped as qkv");
  if (d.B * d.T == 0) return;
  detail::dispatch_activation(
      dtype, [&](auto act) { backward<typename decltype(act)::type>(ctx, dqkv, dout, qkv, att, d, dropout); });
}

}  // namespace zt::cuda
