// Linear layer on the CPU: every product goes through OpenBLAS sgemm (row-major), the weight's
// layout (Conv1D [in, out] or nn.Linear [out, in]) chosen by transposing the operand, not copying it.
// Bias add and bias gradient are plain loops; the bias gradient sums each column in row order.
#include "kernels/cpu/matmul.h"

#include <cstring>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "engine/base/core/bf16.h"
#include "kernels/cpu/bf16_staging.h"
#include "kernels/cpu/blas.h"

namespace zt::cpu {

namespace {

// Columns per task in the bias-gradient reduction: a task owns its columns, so each dbias[c] is
// summed by one thread in row order and the result does not depend on the thread count.
constexpr std::int64_t kBiasColumnBlock = 64;

struct MatmulDims {
  std::int64_t rows;  // N: all leading dimensions of inp flattened
  std::int64_t in;    // C
  std::int64_t out;   // OC
};

std::int64_t last_dim(const TensorView& v) {
  ZT_CHECK(v.shape.ndim() >= 1);
  return v.shape[v.shape.ndim() - 1];
}

// Checks the shapes forward and backward share and returns N, C, OC (the public functions check
// the dtypes: the weight's depends on the activations').
MatmulDims check_dims(const TensorView& out_like, const TensorView& inp, const TensorView& weight,
                      WeightLayout layout) {
  ZT_CHECK(weight.shape.ndim() == 2, "weight must be 2-D, has {} dims", weight.shape.ndim());
  MatmulDims d;
  d.in = last_dim(inp);
  d.out = last_dim(out_like);
  ZT_CHECK(d.in > 0 && d.out > 0);
  d.rows = inp.numel() / d.in;
  ZT_CHECK(out_like.numel() == d.rows * d.out, "out has {} elements, expected {} x {}", out_like.numel(), d.rows,
           d.out);
  const std::int64_t w_rows = layout == WeightLayout::kInOut ? d.in : d.out;
  const std::int64_t w_cols = layout == WeightLayout::kInOut ? d.out : d.in;
  ZT_CHECK(weight.shape[0] == w_rows && weight.shape[1] == w_cols, "weight is [{}, {}], expected [{}, {}]",
           weight.shape[0], weight.shape[1], w_rows, w_cols);
  ZT_CHECK(d.rows <= INT_MAX && d.in <= INT_MAX && d.out <= INT_MAX, "matmul dims exceed BLAS int range");
  return d;
}

// Staging chunks for bf16 products: large, so that sgemm sees tall panels and a wide weight (the
// tied LM head's) is packed few times per call.
constexpr std::int64_t kMatmulStageBytes = std::int64_t{64} << 20;

// The weight as a bf16 product sees it, in `storage`: an F32 weight's elements rounded to bf16
// (then widened, exactly), a BF16 weight's widened. The contract of docs/precision.md: tensor cores
// multiply bf16 weights.
TensorView bf16_rounded_weight(const ExecContext& ctx, const TensorView& weight, std::vector<float>& storage) {
  if (weight.dtype == DType::kBF16) return detail::widened_f32(ctx, weight, storage);
  const std::int64_t n = weight.numel();
  storage.resize(static_cast<std::size_t>(n));
  const float* w = weight.as<float>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) storage[static_cast<std::size_t>(i)] = round_to_bf16(w[i]);
  return TensorView{storage.data(), DType::kF32, Device::kCPU, weight.shape};
}

SgemmSplit product_split(const ExecContext& ctx) {
  return ctx.thread_invariant ? SgemmSplit::kFixedBlocks : SgemmSplit::kLibrary;
}

}  // namespace

void matmul_forward(const ExecContext& ctx, TensorView out, TensorView inp, TensorView weight, WeightLayout layout,
                    TensorView bias) {
  const MatmulDims d = check_dims(out, inp, weight, layout);
  const DType act = activation_dtype("matmul_forward", {out, inp});
  check_param_dtype("matmul_forward", act, {weight, bias});
  const bool has_bias = bias.data != nullptr;
  if (has_bias) ZT_CHECK(bias.numel() == d.out, "bias must have {} elements", d.out);
  if (d.rows == 0) return;
  if (act == DType::kBF16) {
    using detail::Access;
    std::vector<float> rounded, bias_f32;
    const TensorView w = bf16_rounded_weight(ctx, weight, rounded);
    const TensorView b = detail::widened_f32(ctx, bias, bias_f32);
    detail::stage_rows(
        ctx, {{detail::as_rows(out, d.out), Access::kWrite}, {detail::as_rows(inp, d.in), Access::kRead}},
        [&](std::int64_t, std::int64_t, std::span<const TensorView> v) {
          matmul_forward(ctx, v[0], v[1], w, layout, b);
        },
        kMatmulStageBytes);
    return;
  }
  const int N = static_cast<int>(d.rows), C = static_cast<int>(d.in), OC = static_cast<int>(d.out);
  const bool trans_w = layout == WeightLayout::kOutIn;
  float* o = out.as<float>();
  if (has_bias) {
    // Start every output row at the bias and let sgemm accumulate into it (beta = 1): one pass
    // over the output instead of sgemm zeroing it and a second pass adding the bias.
    const float* b = bias.as<float>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
    for (std::int64_t n = 0; n < d.rows; ++n)
      std::memcpy(o + n * d.out, b, static_cast<std::size_t>(d.out) * sizeof(float));
  }
  sgemm(false, trans_w, N, OC, C, 1.0f, inp.as<float>(), C, weight.as<float>(), trans_w ? C : OC,
        has_bias ? 1.0f : 0.0f, o, OC, ctx.num_threads, product_split(ctx));
}

void matmul_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                     TensorView inp, TensorView weight, WeightLayout layout) {
  const MatmulDims d = check_dims(dout, inp, weight, layout);
  const DType act = activation_dtype("matmul_backward", {dinp, dout, inp});
  check_param_dtype("matmul_backward", act, {weight});
  const bool want_dinp = dinp.data != nullptr;
  const bool want_dweight = dweight.data != nullptr;
  const bool want_dbias = dbias.data != nullptr;
  if (want_dinp) ZT_CHECK(dinp.numel() == inp.numel(), "dinp must be shaped like inp");
  if (want_dweight) {
    ZT_CHECK(dweight.dtype == DType::kF32 && dweight.shape == weight.shape, "dweight must be F32 shaped as weight");
  }
  if (want_dbias) ZT_CHECK(dbias.dtype == DType::kF32 && dbias.numel() == d.out, "dbias must be F32 [{}]", d.out);
  if (d.rows == 0) return;
  if (act == DType::kBF16) {
    // Row chunks: dinp's rows are independent, and dweight/dbias accumulate chunk after chunk.
    using detail::Access;
    std::vector<float> rounded;
    // Without dinp the weight is only a shape: no data, so its dtype takes no part.
    const TensorView w = want_dinp ? bf16_rounded_weight(ctx, weight, rounded)
                                   : TensorView{nullptr, DType::kF32, Device::kCPU, weight.shape};
    detail::stage_rows(
        ctx,
        {{want_dinp ? detail::as_rows(dinp, d.in) : TensorView{}, Access::kWrite},
         {detail::as_rows(dout, d.out), Access::kRead},
         {detail::as_rows(inp, d.in), Access::kRead}},
        [&](std::int64_t, std::int64_t, std::span<const TensorView> v) {
          matmul_backward(ctx, v[0], dweight, dbias, v[1], v[2], w, layout);
        },
        kMatmulStageBytes);
    return;
  }
  const int N = static_cast<int>(d.rows), C = static_cast<int>(d.in), OC = static_cast<int>(d.out);
  const float* g = dout.as<float>();
  const float* x = inp.as<float>();
  const bool in_out = layout == WeightLayout::kInOut;

  if (want_dinp) {
    // dinp[N, C] = dout[N, OC] @ W^T; with W stored [OC, C] that is dout @ W.
    sgemm(false, in_out, N, C, OC, 1.0f, g, OC, weight.as<float>(), in_out ? OC : C, 0.0f, dinp.as<float>(), C,
          ctx.num_threads, product_split(ctx));
  }
  if (want_dweight) {
    if (in_out) {  // dW[C, OC] += inp^T @ dout
      sgemm(true, false, C, OC, N, 1.0f, x, C, g, OC, 1.0f, dweight.as<float>(), OC, ctx.num_threads,
            product_split(ctx));
    } else {  // dW[OC, C] += dout^T @ inp
      sgemm(true, false, OC, C, N, 1.0f, g, OC, x, C, 1.0f, dweight.as<float>(), C, ctx.num_threads,
            product_split(ctx));
    }
  }
  if (want_dbias) {
    float* db = dbias.as<float>();
    const std::int64_t num_blocks = (d.out + kBiasColumnBlock - 1) / kBiasColumnBlock;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
    for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
      const std::int64_t c0 = blk * kBiasColumnBlock;
      const std::int64_t width = std::min(kBiasColumnBlock, d.out - c0);
      float acc[kBiasColumnBlock] = {};
      for (std::int64_t n = 0; n < d.rows; ++n) {
        const float* row = g + n * d.out + c0;
        for (std::int64_t c = 0; c < width; ++c) acc[c] += row[c];
      }
      for (std::int64_t c = 0; c < width; ++c) db[c0 + c] += acc[c];
    }
  }
}

}  // namespace zt::cpu
