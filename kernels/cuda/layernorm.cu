// LayerNorm on the GPU: operand checks and launches of the kernels in layernorm_kernels.cuh
// (whose header says how they work).
#include "kernels/cuda/layernorm.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/layernorm_kernels.cuh"
#include "kernels/cuda/norm_rows_choice.h"

namespace zt::cuda {

namespace {

using detail::ln::kBackwardThreads;
using detail::ln::kForwardWarps;
using detail::ln::kRowsPerChunk;
using detail::ln::layernorm_backward_chunk;
using detail::ln::layernorm_backward_params;
using detail::ln::layernorm_forward_kernel;

struct RowDims {
  std::int64_t rows;
  int cols;
};

// Shapes, and the dtypes of the statistics (F32) and the weight (check_param_dtype against the
// activations' dtype `act`, which the callers take from activation_dtype).
RowDims check_views(const char* op, DType act, const TensorView& out_like, const TensorView& mean,
                    const TensorView& rstd, const TensorView& inp, const TensorView& weight) {
  for (const TensorView* v : {&out_like, &mean, &rstd, &inp, &weight}) detail::check_on_gpu(*v, "layernorm operand");
  for (const TensorView* v : {&mean, &rstd}) {
    ZT_CHECK(v->dtype == DType::kF32, "layernorm: mean and rstd are F32, not {}", dtype_name(v->dtype));
  }
  detail::check_param_dtype(op, act, {weight});
  ZT_CHECK(inp.shape.ndim() >= 1);
  const std::int64_t C = inp.shape[inp.shape.ndim() - 1];
  ZT_CHECK(C > 0 && C <= (1 << 30));
  RowDims d{inp.numel() / C, static_cast<int>(C)};
  ZT_CHECK(out_like.numel() == inp.numel(), "out/dout has {} elements, inp {}", out_like.numel(), inp.numel());
  ZT_CHECK(mean.numel() == d.rows && rstd.numel() == d.rows, "mean/rstd must have {} elements", d.rows);
  ZT_CHECK(weight.numel() == C, "weight must have {} elements", C);
  return d;
}

// Both forwards: `residual` and `a2` are null in the plain one (the row is a).
template <typename T, typename P>
void launch_forward(cudaStream_t stream, RowDims d, T* out, float* mean, float* rstd, T* residual, const T* a,
                    const T* a2, const P* weight, const P* bias) {
  if (d.rows == 0) return;
  const auto blocks = static_cast<unsigned>((d.rows + kForwardWarps - 1) / kForwardWarps);
  // wide_vec_aligned(nullptr) holds.
  constexpr int kWide = detail::kWideVec<T>;
  const bool vec = d.cols % kWide == 0 && detail::wide_vec_aligned(out) && detail::wide_vec_aligned(residual) &&
                   detail::wide_vec_aligned(a) && detail::wide_vec_aligned(a2) && detail::wide_vec_aligned(weight) &&
                   detail::wide_vec_aligned(bias);
  const bool whole_row = vec && d.cols / kWide <= std::int64_t{detail::kRowBatch} * detail::kWarpSize;
  const auto kernel = whole_row ? layernorm_forward_kernel<T, P, kWide, true>
                      : vec     ? layernorm_forward_kernel<T, P, kWide>
                                : layernorm_forward_kernel<T, P, 1>;
  kernel<<<blocks, kForwardWarps * detail::kWarpSize, 0, stream>>>(out, mean, rstd, residual, a, a2, weight, bias,
                                                                   d.rows, d.cols);
  ZT_CUDA_CHECK_LAUNCH();
}

// The checks both forwards share; `inp_like` is the row input (inp, or the addend a).
RowDims check_forward(const char* op, DType act, const TensorView& out, const TensorView& mean, const TensorView& rstd,
                      const TensorView& inp_like, const TensorView& weight, const TensorView& bias) {
  const RowDims d = check_views(op, act, out, mean, rstd, inp_like, weight);
  detail::check_on_gpu(bias, "bias");
  ZT_CHECK(bias.dtype == weight.dtype && bias.numel() == d.cols, "bias must be {} [{}] like the weight",
           dtype_name(weight.dtype), d.cols);
  return d;
}

}  // namespace

void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const DType dtype = detail::activation_dtype("layernorm_forward", {out, inp});
  const RowDims d = check_forward("layernorm_forward", dtype, out, mean, rstd, inp, weight, bias);
  detail::dispatch_activation_params(dtype, weight.dtype, [&](auto type, auto ptype) {
    using T = typename decltype(type)::type;
    using P = typename decltype(ptype)::type;
    launch_forward<T, P>(stream, d, detail::act_data<T>(out), mean.as<float>(), rstd.as<float>(), nullptr,
                         detail::act_data<T>(inp), nullptr, detail::act_data<P>(weight), detail::act_data<P>(bias));
  });
}

void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                TensorView rstd, TensorView a, TensorView b, TensorView weight, TensorView bias) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const DType dtype = detail::activation_dtype("layernorm_residual_forward", {residual, out, a, b});
  for (const TensorView* v : {&residual, &a, &b}) {
    detail::check_on_gpu(*v, "residual operand");
    ZT_CHECK(v->numel() == out.numel(), "layernorm_residual_forward: residual, a and b must be shaped as out");
  }
  const RowDims d = check_forward("layernorm_residual_forward", dtype, out, mean, rstd, a, weight, bias);
  detail::dispatch_activation_params(dtype, weight.dtype, [&](auto type, auto ptype) {
    using T = typename decltype(type)::type;
    using P = typename decltype(ptype)::type;
    launch_forward<T, P>(stream, d, detail::act_data<T>(out), mean.as<float>(), rstd.as<float>(),
                         detail::act_data<T>(residual), detail::act_data<T>(a), detail::act_data<T>(b),
                         detail::act_data<P>(weight), detail::act_data<P>(bias));
  });
}

void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd, NormBackwardRows rows) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const DType dtype = detail::activation_dtype("layernorm_backward", {dinp, dout, inp});
  const RowDims d = check_views("layernorm_backward", dtype, dout, mean, rstd, inp, weight);
  for (const TensorView* v : {&dinp, &dweight, &dbias}) detail::check_on_gpu(*v, "layernorm gradient");
  ZT_CHECK(dinp.numel() == inp.numel(), "dinp must be shaped as inp");
  // F32 gradients, or with bf16 activations bf16 ones (added in place into bf16 storage).
  ZT_CHECK((dweight.dtype == DType::kF32 || dweight.dtype == dtype) && dbias.dtype == dweight.dtype,
           "dweight and dbias must both be F32 or {}", dtype_name(dtype));
  ZT_CHECK(dweight.numel() == d.cols && dbias.numel() == d.cols, "dweight and dbias must have {} elements", d.cols);
  const std::int64_t num_chunks = kernel_scratch::chunks_of(d.rows, kRowsPerChunk);
  if (num_chunks == 0) return;
  Buffer partials =
      detail::resources_of(ctx).scratch(DType::kF32, kernel_scratch::layernorm_backward_partial_floats(d.rows, d.cols));
  detail::dispatch_activation_params(dtype, weight.dtype, [&](auto type, auto ptype) {
    using T = typename decltype(type)::type;
    using P = typename decltype(ptype)::type;
    T* di = detail::act_data<T>(dinp);
    const T* g = detail::act_data<T>(dout);
    const T* x = detail::act_data<T>(inp);
    const P* w = detail::act_data<P>(weight);
    constexpr int kWide = detail::kWideVec<T>;
    const bool vec = d.cols % kWide == 0 && detail::wide_vec_aligned(di) && detail::wide_vec_aligned(g) &&
                     detail::wide_vec_aligned(x) && detail::aligned16(partials.data()) && detail::wide_vec_aligned(w);
    const std::int64_t groups = d.cols / kWide;
    auto launch = [&](NormBackwardRows which, void* dinp_void, float* partials_at, std::int64_t n) {
      T* dinp_at = static_cast<T*>(dinp_void);
      const auto grid = static_cast<unsigned>((n + kRowsPerChunk - 1) / kRowsPerChunk);
      if (which == NormBackwardRows::kBlock) {
        // [Note: a block a row] in block_row_backward.cuh.
        const auto kernel =
            detail::block_rows_kernel<detail::ln::LayerNormRows<kWide>, T, P, kWide, kRowsPerChunk>(groups);
        kernel<<<grid, detail::block_row_threads(groups), 0, stream>>>(dinp_at, partials_at, g, x, w, mean.as<float>(),
                                                                       rstd.as<float>(), n, d.cols);
      } else {
        // A warp a row: the row kept from its first pass where it fits a warp's batch of loads.
        const bool whole_row = vec && groups <= std::int64_t{detail::kRowBatch} * detail::kWarpSize;
        const auto chunk_kernel = whole_row ? layernorm_backward_chunk<T, P, kWide, true>
                                  : vec     ? layernorm_backward_chunk<T, P, kWide>
                                            : layernorm_backward_chunk<T, P, 1>;
        chunk_kernel<<<grid, kBackwardThreads, 0, stream>>>(dinp_at, partials_at, g, x, w, mean.as<float>(),
                                                            rstd.as<float>(), n, d.cols);
      }
      ZT_CUDA_CHECK_LAUNCH();
    };
    const detail::NormRowsShape shape{0, dtype, weight.dtype, d.rows, d.cols, kRowsPerChunk, 2 * std::int64_t{d.cols}};
    detail::launch_norm_backward_rows(ctx, rows, vec && groups <= detail::kBlockRowMaxGroups, shape, launch, di,
                                      partials.as<float>());
  });
  detail::dispatch_activation(dweight.dtype, [&](auto type) {
    using D = typename decltype(type)::type;
    layernorm_backward_params<D><<<detail::partial_blocks(d.cols), detail::kPartialThreads, 0, stream>>>(
        detail::act_data<D>(dweight), detail::act_data<D>(dbias), partials.as<float>(), num_chunks, d.cols);
  });
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
