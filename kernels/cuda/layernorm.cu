// LayerNorm on the GPU. Forward: one warp per row, two-pass variance as on the CPU (the row is
// re-read from L1/L2, not DRAM). Backward: one block per 32-row chunk computes each row's dinp
// (a warp per row) and the chunk's dweight/dbias partial sums (a thread per column, rows in
// order); a second kernel adds the chunk partials in chunk order. No float atomics anywhere.
// Both take vector accesses (kVec = 4: a lane owns groups of 4 columns) where C % 4 == 0 and every
// row operand is aligned to its group's width, else single elements (kVec = 1); the reduction order
// is fixed for a given kVec, so results repeat bitwise. The activations (out, inp, residual and its
// addends; dinp, dout) are of storage type T, float or bf16 (docs/precision.md): widened on load,
// statistics and parameter gradients kept in fp32, each activation result rounded once.
#include "kernels/cuda/layernorm.h"

#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kForwardWarps = 8;  // rows per forward block
constexpr int kRowsPerChunk = 32;
constexpr int kBackwardThreads = 256;
constexpr int kColumnThreads = 256;

// With `a2` non-null the row is a + a2 (written to `residual`); otherwise it is a. Each lane owns
// the groups q = lane, lane + 32, ... of kVec columns (see the header comment for kVec).
template <typename T, int kVec>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, T* residual, const T* a, const T* a2,
                                         const float* weight, const float* bias, std::int64_t N, int C) {
  using Vec = detail::ActVec<T, kVec>;
  using ParamVec = detail::FloatVec<kVec>;
  const int lane = threadIdx.x % detail::kWarpSize;
  const std::int64_t row = blockIdx.x * std::int64_t{kForwardWarps} + threadIdx.x / detail::kWarpSize;
  if (row >= N) return;
  const int groups = C / kVec;
  const T* x = a + row * C;
  if (a2 != nullptr) {
    const T* y = a2 + row * C;
    T* r = residual + row * C;
    for (int q = lane; q < groups; q += detail::kWarpSize) {
      Vec xv = Vec::load(x + q * kVec);
      const Vec yv = Vec::load(y + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) xv[i] += yv[i];
      xv.store(r + q * kVec);
    }
    // Later passes read back what this lane wrote (same lane, same groups): for bf16 the rounded
    // residual, so the fused op equals residual_forward then layernorm_forward.
    x = r;
  }
  float sum = 0.0f;
  for (int q = lane; q < groups; q += detail::kWarpSize) {
    const Vec xv = Vec::load(x + q * kVec);
#pragma unroll
    for (int i = 0; i < kVec; ++i) sum += xv[i];
  }
  const float m = detail::warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int q = lane; q < groups; q += detail::kWarpSize) {
    const Vec xv = Vec::load(x + q * kVec);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const float d = xv[i] - m;
      sq += d * d;
    }
  }
  const float var = detail::warp_sum(sq) / static_cast<float>(C);
  const float s = 1.0f / sqrtf(var + cpu::kLayerNormEps);
  T* o = out + row * C;
  for (int q = lane; q < groups; q += detail::kWarpSize) {
    const Vec xv = Vec::load(x + q * kVec);
    const ParamVec wv = ParamVec::load(weight + q * kVec), bv = ParamVec::load(bias + q * kVec);
    Vec ov;
#pragma unroll
    for (int i = 0; i < kVec; ++i) ov[i] = (xv[i] - m) * s * wv[i] + bv[i];
    ov.store(o + q * kVec);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// One block per chunk of kRowsPerChunk rows. partials: [num_chunks, 2, C] (dweight, then dbias).
// dinp accumulates as round(widen(old) + contribution) for bf16 (docs/precision.md).
template <typename T, int kVec>
__global__ void layernorm_backward_chunk(T* dinp, float* partials, const T* dout, const T* inp, const float* weight,
                                         const float* mean, const float* rstd, std::int64_t N, int C) {
  using Vec = detail::ActVec<T, kVec>;
  using ParamVec = detail::FloatVec<kVec>;
  const int lane = threadIdx.x % detail::kWarpSize, warp = threadIdx.x / detail::kWarpSize;
  constexpr int kWarps = kBackwardThreads / detail::kWarpSize;
  const std::int64_t row0 = blockIdx.x * std::int64_t{kRowsPerChunk};
  const int rows = static_cast<int>(N - row0 < kRowsPerChunk ? N - row0 : kRowsPerChunk);
  const int groups = C / kVec;
  for (int r = warp; r < rows; r += kWarps) {
    const std::int64_t row = row0 + r;
    const T* g = dout + row * C;
    const T* x = inp + row * C;
    const float m = mean[row], s = rstd[row];
    float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
    for (int q = lane; q < groups; q += detail::kWarpSize) {
      const Vec gv = Vec::load(g + q * kVec), xv = Vec::load(x + q * kVec);
      const ParamVec wv = ParamVec::load(weight + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const float dn = gv[i] * wv[i];
        dnorm_sum += dn;
        dnorm_norm_sum += dn * ((xv[i] - m) * s);
      }
    }
    const float dnorm_mean = detail::warp_sum(dnorm_sum) / static_cast<float>(C);
    const float dnorm_norm_mean = detail::warp_sum(dnorm_norm_sum) / static_cast<float>(C);
    T* di = dinp + row * C;
    for (int q = lane; q < groups; q += detail::kWarpSize) {
      const Vec gv = Vec::load(g + q * kVec), xv = Vec::load(x + q * kVec);
      const ParamVec wv = ParamVec::load(weight + q * kVec);
      Vec dv = Vec::load(di + q * kVec);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const float norm = (xv[i] - m) * s;
        dv[i] += s * (gv[i] * wv[i] - dnorm_mean - norm * dnorm_norm_mean);
      }
      dv.store(di + q * kVec);
    }
  }
  // A thread per group of kVec columns, rows in order: each partial is the same fixed-order sum for
  // either kVec.
  float* dw_part = partials + blockIdx.x * std::int64_t{2} * C;
  float* db_part = dw_part + C;
  for (int q = threadIdx.x; q < groups; q += kBackwardThreads) {
    ParamVec dw{}, db{};
    for (int r = 0; r < rows; ++r) {
      const std::int64_t row = row0 + r;
      const Vec gv = Vec::load(dout + row * C + q * kVec), xv = Vec::load(inp + row * C + q * kVec);
      const float m = mean[row], s = rstd[row];
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        dw[i] += gv[i] * ((xv[i] - m) * s);
        db[i] += gv[i];
      }
    }
    dw.store(dw_part + q * kVec);
    db.store(db_part + q * kVec);
  }
}

__global__ void layernorm_backward_params(float* dweight, float* dbias, const float* partials,
                                          std::int64_t num_chunks, int C) {
  const int c = blockIdx.x * kColumnThreads + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (std::int64_t k = 0; k < num_chunks; ++k) {  // chunk order: deterministic
    dw += partials[k * 2 * C + c];
    db += partials[k * 2 * C + C + c];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

struct RowDims {
  std::int64_t rows;
  int cols;
};

// Shapes, and the dtypes of the fp32 operands (statistics and parameters); the callers check the
// activations' dtypes (activation_dtype).
RowDims check_views(const TensorView& out_like, const TensorView& mean, const TensorView& rstd,
                    const TensorView& inp, const TensorView& weight) {
  for (const TensorView* v : {&out_like, &mean, &rstd, &inp, &weight}) detail::check_on_gpu(*v, "layernorm operand");
  for (const TensorView* v : {&mean, &rstd, &weight}) {
    ZT_CHECK(v->dtype == DType::kF32, "layernorm: mean, rstd and weight are F32, not {}", dtype_name(v->dtype));
  }
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
template <typename T>
void launch_forward(cudaStream_t stream, RowDims d, T* out, float* mean, float* rstd, T* residual, const T* a,
                    const T* a2, const float* weight, const float* bias) {
  if (d.rows == 0) return;
  const auto blocks = static_cast<unsigned>((d.rows + kForwardWarps - 1) / kForwardWarps);
  // act_vec4_aligned(nullptr) holds.
  const bool vec = d.cols % 4 == 0 && detail::act_vec4_aligned(out) && detail::act_vec4_aligned(residual) &&
                   detail::act_vec4_aligned(a) && detail::act_vec4_aligned(a2) && detail::aligned16(weight) &&
                   detail::aligned16(bias);
  const auto kernel = vec ? layernorm_forward_kernel<T, 4> : layernorm_forward_kernel<T, 1>;
  kernel<<<blocks, kForwardWarps * detail::kWarpSize, 0, stream>>>(out, mean, rstd, residual, a, a2, weight, bias,
                                                                   d.rows, d.cols);
  ZT_CUDA_CHECK_LAUNCH();
}

// The checks both forwards share; `inp_like` is the row input (inp, or the addend a).
RowDims check_forward(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                      const TensorView& inp_like, const TensorView& weight, const TensorView& bias) {
  const RowDims d = check_views(out, mean, rstd, inp_like, weight);
  detail::check_on_gpu(bias, "bias");
  ZT_CHECK(bias.dtype == DType::kF32 && bias.numel() == d.cols, "bias must be F32 [{}]", d.cols);
  return d;
}

}  // namespace

void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const DType dtype = detail::activation_dtype("layernorm_forward", {out, inp});
  const RowDims d = check_forward(out, mean, rstd, inp, weight, bias);
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    launch_forward<T>(stream, d, detail::act_data<T>(out), mean.as<float>(), rstd.as<float>(), nullptr,
                      detail::act_data<T>(inp), nullptr, weight.as<float>(), bias.as<float>());
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
  const RowDims d = check_forward(out, mean, rstd, a, weight, bias);
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    launch_forward<T>(stream, d, detail::act_data<T>(out), mean.as<float>(), rstd.as<float>(),
                      detail::act_data<T>(residual), detail::act_data<T>(a), detail::act_data<T>(b),
                      weight.as<float>(), bias.as<float>());
  });
}

void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const DType dtype = detail::activation_dtype("layernorm_backward", {dinp, dout, inp});
  const RowDims d = check_views(dout, mean, rstd, inp, weight);
  for (const TensorView* v : {&dinp, &dweight, &dbias}) detail::check_on_gpu(*v, "layernorm gradient");
  ZT_CHECK(dinp.numel() == inp.numel(), "dinp must be shaped as inp");
  ZT_CHECK(dweight.dtype == DType::kF32 && dweight.numel() == d.cols, "dweight must be F32 [{}]", d.cols);
  ZT_CHECK(dbias.dtype == DType::kF32 && dbias.numel() == d.cols, "dbias must be F32 [{}]", d.cols);
  const std::int64_t num_chunks = (d.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  if (num_chunks == 0) return;
  Buffer partials = detail::resources_of(ctx).scratch(DType::kF32, num_chunks * 2 * d.cols);
  detail::dispatch_activation(dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    T* di = detail::act_data<T>(dinp);
    const T* g = detail::act_data<T>(dout);
    const T* x = detail::act_data<T>(inp);
    const bool vec = d.cols % 4 == 0 && detail::act_vec4_aligned(di) && detail::act_vec4_aligned(g) &&
                     detail::act_vec4_aligned(x) && detail::aligned16(partials.data()) &&
                     detail::aligned16(weight.data);
    const auto chunk_kernel = vec ? layernorm_backward_chunk<T, 4> : layernorm_backward_chunk<T, 1>;
    chunk_kernel<<<static_cast<unsigned>(num_chunks), kBackwardThreads, 0, stream>>>(
        di, partials.as<float>(), g, x, weight.as<float>(), mean.as<float>(), rstd.as<float>(), d.rows, d.cols);
  });
  ZT_CUDA_CHECK_LAUNCH();
  layernorm_backward_params<<<(d.cols + kColumnThreads - 1) / kColumnThreads, kColumnThreads, 0, stream>>>(
      dweight.as<float>(), dbias.as<float>(), partials.as<float>(), num_chunks, d.cols);
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
