// Linear layer through cuBLASLt. cuBLASLt is column-major; a row-major X[r, c] is the column-major
// X^T, so every row-major product C = A @ B runs as C^T = B^T @ A^T (operands swapped, no copies).
// The workspace comes from KernelResources (sized once). Bias gradients accumulate (+=) like the
// CPU's, by our own two-stage column sum or, where measured faster, cuBLASLt's bias-gradient
// epilogue on the weight-gradient product (bias_grad.cu).
#include "kernels/cuda/matmul.h"

#include <algorithm>

#include "kernels/contracts/kernel_scratch.h"
#include "kernels/cuda/bias_grad.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/lt_gemm.h"
#include "kernels/cuda/residual.h"

namespace zt::cuda {

namespace {

using detail::LtGemm;
using detail::run_gemm;

struct MatmulDims {
  std::int64_t rows, in, out;
};

// Shapes, and the weight's dtype (check_param_dtype against the activations' dtype `act`, which the
// callers take from activation_dtype): F32 with either activation dtype (rounded to bf16 for the
// product where gemm_input says so), or BF16 with BF16 activations (bf16 working weights, as stored).
MatmulDims check_dims(const char* op, DType act, const TensorView& out_like, const TensorView& inp,
                      const TensorView& weight, WeightLayout layout) {
  for (const TensorView* v : {&out_like, &inp, &weight}) detail::check_on_gpu(*v, "matmul operand");
  detail::check_param_dtype(op, act, {weight});
  ZT_CHECK(weight.shape.ndim() == 2, "weight must be 2-D, has {} dims", weight.shape.ndim());
  ZT_CHECK(inp.shape.ndim() >= 1 && out_like.shape.ndim() >= 1);
  MatmulDims d;
  d.in = inp.shape[inp.shape.ndim() - 1];
  d.out = out_like.shape[out_like.shape.ndim() - 1];
  ZT_CHECK(d.in > 0 && d.out > 0);
  d.rows = inp.numel() / d.in;
  ZT_CHECK(out_like.numel() == d.rows * d.out, "out has {} elements, expected {} x {}", out_like.numel(), d.rows,
           d.out);
  const std::int64_t w_rows = layout == WeightLayout::kInOut ? d.in : d.out;
  const std::int64_t w_cols = layout == WeightLayout::kInOut ? d.out : d.in;
  ZT_CHECK(weight.shape[0] == w_rows && weight.shape[1] == w_cols, "weight is [{}, {}], expected [{}, {}]",
           weight.shape[0], weight.shape[1], w_rows, w_cols);
  return d;
}

cudaDataType_t cuda_type(DType t) { return t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F; }

// A product's input as cuBLASLt reads it: the tensor itself, or an fp32 tensor rounded to bf16 in
// scratch (held until the product is queued; the allocator orders its reuse on the stream). fp32
// inputs are rounded when the op's activations are BF16 (the fp32 weight: docs/precision.md rounds
// it for the tensor cores) and, with F32 activations, under MatmulPrecision::kBf16. Products of
// bf16 inputs are exact in fp32 and summed in fp32, so only the inputs' rounding differs from an
// fp32 product (and, for BF16 results, the results' one rounding).
struct GemmInput {
  const void* data = nullptr;
  cudaDataType_t type = CUDA_R_32F;
  Buffer rounded;
};

GemmInput gemm_input(const ExecContext& ctx, const TensorView& v, DType activations) {
  KernelResources& res = detail::resources_of(ctx);
  if (!kernel_scratch::rounds_to_bf16(v.dtype, activations, res.fp32_matmuls == MatmulPrecision::kBf16)) {
    return {v.data, cuda_type(v.dtype), {}};
  }
  GemmInput in{nullptr, CUDA_R_16BF, res.scratch(DType::kBF16, v.numel())};
  cast(ctx, in.rounded.view(v.shape), v);
  in.data = in.rounded.data();
  return in;
}

// [Note: fp32 bias with bf16 results]
// cuBLASLt's bias epilogue reads the bias in the type of D (cublasLt.h on
// CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: other bias types only for IMMA and fp8 kernels), so a bf16 D
// cannot take the fp32 bias that
// docs/precision.md adds before the result's single rounding (a bf16 copy of the bias would round
// it first). So with BF16 activations and an F32 bias the product runs into fp32 scratch with the
// fp32 bias epilogue (and the GELU's fp32 aux), a chunk of rows at a time, and each chunk is then
// rounded into out (and gelu_pre): round(x @ W + b), one rounding. The extra pass reads and writes
// the result once more; without a bias (the LM head) the product writes bf16 directly. The chunks
// hold kernel_scratch::kWideResultBytes at most.

void forward_through_fp32_scratch(const ExecContext& ctx, LtGemm g, TensorView out, TensorView gelu_pre,
                                  const MatmulDims& d) {
  const bool has_gelu = gelu_pre.data != nullptr;
  const std::int64_t chunk = kernel_scratch::wide_result_chunk_rows(d.rows, d.out, has_gelu);
  KernelResources& res = detail::resources_of(ctx);
  Buffer wide = res.scratch(DType::kF32, chunk * d.out);
  Buffer wide_pre = has_gelu ? res.scratch(DType::kF32, chunk * d.out) : Buffer{};
  const auto* x = static_cast<const char*>(g.B);
  const std::int64_t x_row_bytes = d.in * 2;  // bf16 activations
  g.d_type = CUDA_R_32F;
  for (std::int64_t r0 = 0; r0 < d.rows; r0 += chunk) {
    const std::int64_t n = std::min(chunk, d.rows - r0);
    g.n = n;
    g.B = x + r0 * x_row_bytes;
    g.D = wide.data();
    g.aux = has_gelu ? wide_pre.data() : nullptr;
    run_gemm(ctx, g);
    cast(ctx, out.slice(r0 * d.out, n * d.out), wide.view().slice(0, n * d.out));
    if (has_gelu) cast(ctx, gelu_pre.slice(r0 * d.out, n * d.out), wide_pre.view().slice(0, n * d.out));
  }
}

// matmul_forward, and with a residual (shaped and typed as out) out = residual + the product,
// added in the epilogue (beta 1, C the residual; in place where residual is out). False where the
// residual cannot go into the epilogue: an fp32 bias with bf16 results (the scratch route), or no
// algorithm cuBLASLt offers for it; the residual is then intact (out, where apart from it, may
// hold a search's timed runs) and the caller adds it.
bool forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
             TensorView bias, TensorView gelu_pre, TensorView residual) {
  const DType act = detail::activation_dtype("matmul_forward", {out, inp});
  const MatmulDims d = check_dims("matmul_forward", act, out, inp, weight, layout);
  const bool has_bias = bias.data != nullptr, has_gelu = gelu_pre.data != nullptr;
  if (has_bias) {
    detail::check_on_gpu(bias, "bias");
    detail::check_param_dtype("matmul_forward", act, {bias});
    ZT_CHECK(bias.numel() == d.out, "matmul_forward: bias must have {} elements", d.out);
  }
  if (has_gelu) {
    detail::check_on_gpu(gelu_pre, "gelu_pre");
    ZT_CHECK(gelu_pre.dtype == out.dtype && gelu_pre.numel() == out.numel(),
             "gelu_pre must be shaped and typed as out");
    ZT_CHECK(d.out % 8 == 0, "the GELU epilogue needs OC a multiple of 8, OC = {}", d.out);
  }
  const bool has_residual = residual.data != nullptr;
  if (d.rows == 0) return true;
  if (has_residual && act == DType::kBF16 && has_bias && bias.dtype == DType::kF32) return false;
  // cuBLASLt's bias epilogue needs a 16-byte aligned bias. A bias inside a unit's buffer starts at
  // its element offset, which for bf16 parameters is 16-byte aligned only where C % 8 == 0 (every
  // GPT-2 width, not every config): others go through an aligned scratch copy (OC elements).
  Buffer aligned_bias;
  if (has_bias && !detail::aligned16(bias.data)) {
    aligned_bias = detail::resources_of(ctx).scratch(bias.dtype, d.out);
    cast(ctx, aligned_bias.view(bias.shape), bias);
    bias = aligned_bias.view(bias.shape);
  }
  // out^T[OC, N] = op(W)[OC, C] @ inp^T[C, N]. Row-major W [C, OC] is column-major [OC, C] (no
  // transpose); row-major W [OC, C] is column-major [C, OC] (transpose).
  const GemmInput w = gemm_input(ctx, weight, act), x = gemm_input(ctx, inp, act);
  ZT_CHECK(w.type == x.type, "matmul_forward: weight and inp reach cuBLASLt in different types");
  LtGemm g;
  g.trans_a = layout == WeightLayout::kOutIn;
  g.m = d.out, g.n = d.rows, g.k = d.in;
  g.A = w.data, g.lda = layout == WeightLayout::kInOut ? d.out : d.in;
  g.B = x.data, g.ldb = d.in;
  g.D = out.data, g.ldd = d.out;
  g.ab_type = w.type;
  g.d_type = cuda_type(out.dtype);
  g.bias = has_bias ? bias.data : nullptr;
  g.aux = has_gelu ? gelu_pre.data : nullptr;
  g.epilogue = has_gelu ? (has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
                        : (has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
  if (has_residual) {
    g.beta = 1.0f;
    g.C = residual.data;  // out itself: in place
    return detail::run_gemm_if_supported(ctx, g);
  }
  if (act == DType::kBF16 && has_bias && bias.dtype == DType::kF32) {
    forward_through_fp32_scratch(ctx, g, out, gelu_pre, d);  // [Note: fp32 bias with bf16 results]
  } else {
    run_gemm(ctx, g);
  }
  return true;
}

}  // namespace

void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                    TensorView bias, TensorView gelu_pre) {
  forward(ctx, out, inp, weight, layout, bias, gelu_pre, {});
}

void matmul_residual_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight,
                             WeightLayout layout, TensorView bias, TensorView residual) {
  detail::check_on_gpu(residual, "residual");
  ZT_CHECK(residual.dtype == out.dtype && residual.numel() == out.numel(),
           "matmul_residual_forward: the residual must be shaped and typed as out");
  ZT_CHECK(residual.data != nullptr, "matmul_residual_forward: no residual");
  const auto* r = static_cast<const char*>(residual.data);
  const auto* o = static_cast<const char*>(out.data);
  ZT_CHECK(r == o || r + residual.size_bytes() <= o || o + out.size_bytes() <= r,
           "matmul_residual_forward: the residual overlaps out without being out");
  if (forward(ctx, out, inp, weight, layout, bias, {}, residual)) return;
  if (residual.data != out.data) {
    forward(ctx, out, inp, weight, layout, bias, {}, {});
    residual_forward(ctx, out, out, residual);
    return;
  }
  Buffer product = detail::resources_of(ctx).scratch(out.dtype, out.numel());  // out holds the residual
  forward(ctx, product.view(out.shape), inp, weight, layout, bias, {}, {});
  residual_forward(ctx, out, out, product.view(out.shape));
}

void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                     TensorView inp, TensorView weight, WeightLayout layout, TensorView gelu_pre) {
  // A skipped dinp ({}: no data) takes no part in the dtype check.
  const DType act = detail::activation_dtype("matmul_backward", {dinp, dout, inp});
  const MatmulDims d = check_dims("matmul_backward", act, dout, inp, weight, layout);
  const bool in_out = layout == WeightLayout::kInOut;
  // dout feeds both products; each other input is rounded (kBf16) only when its product runs.
  const bool need_dinp = dinp.data != nullptr && d.rows > 0, need_dweight = dweight.data != nullptr && d.rows > 0;
  const GemmInput dy = need_dinp || need_dweight ? gemm_input(ctx, dout, act) : GemmInput{};
  if (dinp.data != nullptr) {
    detail::check_on_gpu(dinp, "dinp");
    ZT_CHECK(dinp.numel() == inp.numel(), "dinp must be shaped as inp");
    const bool has_gelu = gelu_pre.data != nullptr;
    if (has_gelu) {
      detail::check_on_gpu(gelu_pre, "gelu_pre");
      ZT_CHECK(gelu_pre.dtype == inp.dtype && gelu_pre.numel() == inp.numel(), "gelu_pre must be shaped as dinp");
      ZT_CHECK(d.in % 8 == 0, "the dGELU epilogue needs C a multiple of 8, C = {}", d.in);
    }
    if (need_dinp) {
      // dinp^T[C, N] = op(W)[C, OC] @ dout^T[OC, N].
      const GemmInput w = gemm_input(ctx, weight, act);  // BF16 activations: dinp = round(dout @ W_bf16^T)
      LtGemm g;
      g.trans_a = in_out;
      g.m = d.in, g.n = d.rows, g.k = d.out;
      g.A = w.data, g.lda = in_out ? d.out : d.in;
      g.B = dy.data, g.ldb = d.out;
      g.D = dinp.data, g.ldd = d.in;
      g.ab_type = dy.type;
      g.d_type = cuda_type(dinp.dtype);
      g.aux = has_gelu ? gelu_pre.data : nullptr;
      g.epilogue = has_gelu ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DEFAULT;
      run_gemm(ctx, g);
    }
  }
  const bool need_dbias = dbias.data != nullptr && d.rows > 0;
  if (need_dbias) {
    detail::check_on_gpu(dbias, "dbias");
    ZT_CHECK((dbias.dtype == DType::kF32 || dbias.dtype == inp.dtype) && dbias.numel() == d.out,
             "dbias must be F32 or {} [{}]", dtype_name(inp.dtype), d.out);
  }
  const int OC = static_cast<int>(d.out);
  if (!need_dweight) {
    if (need_dbias) detail::bias_grad_kernels(ctx, dbias, dout, d.rows, OC);
    return;
  }
  detail::check_on_gpu(dweight, "dweight");
  ZT_CHECK(dweight.shape == weight.shape && (dweight.dtype == DType::kF32 || dweight.dtype == inp.dtype),
           "dweight must be shaped as weight, F32 or {}", dtype_name(inp.dtype));
  // BF16: bf16 A/B, fp32 accumulation, C/D (beta 1) the F32 or BF16 dweight (round(widen(C) + AB)).
  const GemmInput x = gemm_input(ctx, inp, act);
  LtGemm g;
  g.ab_type = x.type;
  g.d_type = cuda_type(dweight.dtype);
  g.beta = 1.0f;  // accumulate, as the CPU's dweight +=
  if (in_out) {   // dW[C, OC] row-major = column-major [OC, C] = dout^T[OC, N] @ inp[N, C]
    g.m = d.out, g.n = d.in, g.k = d.rows;
    g.A = dy.data, g.lda = d.out, g.trans_a = false;
    g.B = x.data, g.ldb = d.in, g.trans_b = true;
    g.D = dweight.data, g.ldd = d.out;
  } else {  // dW[OC, C] row-major = column-major [C, OC] = inp^T[C, N] @ dout[N, OC]
    g.m = d.in, g.n = d.out, g.k = d.rows;
    g.A = x.data, g.lda = d.in, g.trans_a = false;
    g.B = dy.data, g.ldb = d.out, g.trans_b = true;
    g.D = dweight.data, g.ldd = d.in;
  }
  // dout is A (in_out: its rows are D's) or B (D's columns); the bias epilogue sums it over k.
  detail::weight_and_bias_grad(ctx, g, /*dout_is_a=*/in_out, /*dout_operand_is_dout=*/dy.data == dout.data,
                               need_dbias ? dbias : TensorView{}, dout, d.rows, OC);
}

}  // namespace zt::cuda
