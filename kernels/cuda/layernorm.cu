// LayerNorm on the GPU. Forward: one warp per row, two-pass variance as on the CPU (the row is
// re-read from L1/L2, not DRAM). Backward: one block per 32-row chunk computes each row's dinp
// (a warp per row) and the chunk's dweight/dbias partial sums (a thread per column, rows in
// order); a second kernel adds the chunk partials in chunk order. No float atomics anywhere.
#include "kernels/cuda/layernorm.h"

#include "kernels/cuda/common.cuh"

namespace zt::cuda {

namespace {

constexpr int kForwardWarps = 8;  // rows per forward block
constexpr int kRowsPerChunk = 32;
constexpr int kBackwardThreads = 256;
constexpr int kColumnThreads = 256;

// With `a2` non-null the row is a + a2 (written to `residual`); otherwise it is a.
__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, float* residual, const float* a,
                                         const float* a2, const float* weight, const float* bias, std::int64_t N,
                                         int C) {
  const int lane = threadIdx.x % detail::kWarpSize;
  const std::int64_t row = blockIdx.x * std::int64_t{kForwardWarps} + threadIdx.x / detail::kWarpSize;
  if (row >= N) return;
  const float* x = a + row * C;
  if (a2 != nullptr) {
    const float* y = a2 + row * C;
    float* r = residual + row * C;
    for (int c = lane; c < C; c += detail::kWarpSize) r[c] = x[c] + y[c];
    x = r;  // later passes read back what this lane wrote (same lane, same indices)
  }
  float sum = 0.0f;
  for (int c = lane; c < C; c += detail::kWarpSize) sum += x[c];
  const float m = detail::warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int c = lane; c < C; c += detail::kWarpSize) {
    const float d = x[c] - m;
    sq += d * d;
  }
  const float var = detail::warp_sum(sq) / static_cast<float>(C);
  const float s = 1.0f / sqrtf(var + cpu::kLayerNormEps);
  float* o = out + row * C;
  for (int c = lane; c < C; c += detail::kWarpSize) o[c] = (x[c] - m) * s * weight[c] + bias[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// One block per chunk of kRowsPerChunk rows. partials: [num_chunks, 2, C] (dweight, then dbias).
__global__ void layernorm_backward_chunk(float* dinp, float* partials, const float* dout, const float* inp,
                                         const float* weight, const float* mean, const float* rstd, std::int64_t N,
                                         int C) {
  const int lane = threadIdx.x % detail::kWarpSize, warp = threadIdx.x / detail::kWarpSize;
  constexpr int kWarps = kBackwardThreads / detail::kWarpSize;
  const std::int64_t row0 = blockIdx.x * std::int64_t{kRowsPerChunk};
  const int rows = static_cast<int>(N - row0 < kRowsPerChunk ? N - row0 : kRowsPerChunk);
  for (int r = warp; r < rows; r += kWarps) {
    const std::int64_t row = row0 + r;
    const float* g = dout + row * C;
    const float* x = inp + row * C;
    const float m = mean[row], s = rstd[row];
    float dnorm_sum = 0.0f, dnorm_norm_sum = 0.0f;
    for (int c = lane; c < C; c += detail::kWarpSize) {
      const float dn = g[c] * weight[c];
      dnorm_sum += dn;
      dnorm_norm_sum += dn * ((x[c] - m) * s);
    }
    const float dnorm_mean = detail::warp_sum(dnorm_sum) / static_cast<float>(C);
    const float dnorm_norm_mean = detail::warp_sum(dnorm_norm_sum) / static_cast<float>(C);
    float* di = dinp + row * C;
    for (int c = lane; c < C; c += detail::kWarpSize) {
      const float norm = (x[c] - m) * s;
      di[c] += s * (g[c] * weight[c] - dnorm_mean - norm * dnorm_norm_mean);
    }
  }
  float* dw_part = partials + blockIdx.x * std::int64_t{2} * C;
  float* db_part = dw_part + C;
  for (int c = threadIdx.x; c < C; c += kBackwardThreads) {
    float dw = 0.0f, db = 0.0f;
    for (int r = 0; r < rows; ++r) {
      const std::int64_t row = row0 + r;
      const float g = dout[row * C + c];
      dw += g * ((inp[row * C + c] - mean[row]) * rstd[row]);
      db += g;
    }
    dw_part[c] = dw;
    db_part[c] = db;
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

RowDims check_views(const TensorView& out_like, const TensorView& mean, const TensorView& rstd,
                    const TensorView& inp, const TensorView& weight) {
  for (const TensorView* v : {&out_like, &mean, &rstd, &inp, &weight}) {
    ZT_CHECK(v->dtype == DType::kF32, "layernorm is fp32 only");
    detail::check_on_gpu(*v, "layernorm operand");
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

void launch_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, float* residual,
                    const float* a, const float* a2, TensorView inp_like, TensorView weight, TensorView bias) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const RowDims d = check_views(out, mean, rstd, inp_like, weight);
  detail::check_on_gpu(bias, "bias");
  ZT_CHECK(bias.dtype == DType::kF32 && bias.numel() == d.cols, "bias must be F32 [{}]", d.cols);
  if (d.rows == 0) return;
  const auto blocks = static_cast<unsigned>((d.rows + kForwardWarps - 1) / kForwardWarps);
  layernorm_forward_kernel<<<blocks, kForwardWarps * detail::kWarpSize, 0, stream>>>(
      out.as<float>(), mean.as<float>(), rstd.as<float>(), residual, a, a2, weight.as<float>(), bias.as<float>(),
      d.rows, d.cols);
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void layernorm_forward(const ExecContext& ctx, TensorView out, TensorView mean, TensorView rstd, TensorView inp,
                       TensorView weight, TensorView bias) {
  launch_forward(ctx, out, mean, rstd, nullptr, inp.as<float>(), nullptr, inp, weight, bias);
}

void layernorm_residual_forward(const ExecContext& ctx, TensorView residual, TensorView out, TensorView mean,
                                TensorView rstd, TensorView a, TensorView b, TensorView weight, TensorView bias) {
  for (const TensorView* v : {&residual, &a, &b}) {
    detail::check_on_gpu(*v, "residual operand");
    ZT_CHECK(v->dtype == DType::kF32 && v->numel() == out.numel(), "residual, a and b must be F32 shaped as out");
  }
  launch_forward(ctx, out, mean, rstd, residual.as<float>(), a.as<float>(), b.as<float>(), a, weight, bias);
}

void layernorm_backward(const ExecContext& ctx, TensorView dinp, TensorView dweight, TensorView dbias, TensorView dout,
                        TensorView inp, TensorView weight, TensorView mean, TensorView rstd) {
  const cudaStream_t stream = detail::stream_of(ctx);
  const RowDims d = check_views(dout, mean, rstd, inp, weight);
  for (const TensorView* v : {&dinp, &dweight, &dbias}) detail::check_on_gpu(*v, "layernorm gradient");
  ZT_CHECK(dinp.dtype == DType::kF32 && dinp.numel() == inp.numel(), "dinp must be F32 like inp");
  ZT_CHECK(dweight.dtype == DType::kF32 && dweight.numel() == d.cols, "dweight must be F32 [{}]", d.cols);
  ZT_CHECK(dbias.dtype == DType::kF32 && dbias.numel() == d.cols, "dbias must be F32 [{}]", d.cols);
  const std::int64_t num_chunks = (d.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  if (num_chunks == 0) return;
  Buffer partials = detail::resources_of(ctx).scratch(DType::kF32, num_chunks * 2 * d.cols);
  layernorm_backward_chunk<<<static_cast<unsigned>(num_chunks), kBackwardThreads, 0, stream>>>(
      dinp.as<float>(), partials.as<float>(), dout.as<float>(), inp.as<float>(), weight.as<float>(), mean.as<float>(),
      rstd.as<float>(), d.rows, d.cols);
  ZT_CUDA_CHECK_LAUNCH();
  layernorm_backward_params<<<(d.cols + kColumnThreads - 1) / kColumnThreads, kColumnThreads, 0, stream>>>(
      dweight.as<float>(), dbias.as<float>(), partials.as<float>(), num_chunks, d.cols);
  ZT_CUDA_CHECK_LAUNCH();
}

}  // namespace zt::cuda
