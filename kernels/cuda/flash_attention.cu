// Flash-style attention kernels on CUDA cores, and the dispatch to the tensor-core ones
// (flash_attention_tc.cu) for BF16 activations. One thread owns one query row (forward, dq) or one
// key row (dk, dv) and keeps it in registers; a block of kRows threads shares tiles of the other
// side's rows in shared memory. Scores use q pre-multiplied by 1/sqrt(hs). Causality bounds every
// loop, so a block only visits the tiles its rows can see. Kernels are templated on the activation
// storage type (docs/precision.md): bf16 qkv, out, dout and dqkv are widened on load, everything
// (registers, shared-memory tiles, lse, delta) is fp32, and each stored result is rounded once.
// Dropout on the probabilities multiplies each P_ij by its mask factor where it meets v_j (forward,
// dV) or dO . v_j (dP); the softmax sum, lse and the row term delta = dO . out stay as without it.
#include "kernels/cuda/flash_attention.h"

#include <cmath>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dropout_mask.cuh"
#include "kernels/cuda/flash_attention_tc.cuh"

namespace zt::cuda {

namespace {

constexpr int kRows = 64;  // rows owned per block, one per thread

// Rows per shared-memory tile: two tiles of kTileRows x HS floats stay within 32 KiB.
template <int HS>
constexpr int kTileRows = 4096 / HS;

using Geometry = detail::FlashGeometry;
using detail::MaskCursor;
using detail::MaskParams;

// Pointers to row t's q, k, v of head h in sample b's [T, 3C] block.
template <typename Act>
__device__ __forceinline__ const Act* qkv_row(const Act* qkv, const Geometry& g, int b, int t, int h, int part,
                                              int hs) {
  return qkv + (static_cast<std::int64_t>(b) * g.T + t) * 3 * g.C + part * g.C + h * hs;
}

// The block's threads copy keys and values k0 .. k0 + KT - 1 of head h (zeros past T) into shared
// memory; the caller synchronises before reading them.
template <int HS, typename Act>
__device__ __forceinline__ void load_kv_tile(float (*ks)[HS], float (*vs)[HS], const Act* qkv, const Geometry& g,
                                             int b, int h, int k0) {
  for (int e = threadIdx.x; e < kTileRows<HS> * HS; e += blockDim.x) {
    const int r = e / HS, d = e % HS, j = k0 + r;
    ks[r][d] = j < g.T ? detail::load_act(qkv_row(qkv, g, b, j, h, 1, HS) + d) : 0.0f;
    vs[r][d] = j < g.T ? detail::load_act(qkv_row(qkv, g, b, j, h, 2, HS) + d) : 0.0f;
  }
}

template <int HS, typename Act>
__global__ void flash_forward_kernel(Act* out, float* lse, const Act* qkv, Geometry g, MaskParams mask) {
  constexpr int KT = kTileRows<HS>;
  __shared__ float ks[KT][HS];
  __shared__ float vs[KT][HS];
  const int b = blockIdx.y / g.NH, h = blockIdx.y % g.NH;
  const int first = blockIdx.x * kRows, i = first + threadIdx.x;
  const bool active = i < g.T;
  float q[HS], acc[HS];
  float m = -INFINITY, l = 0.0f;
  MaskCursor cursor(mask, b);
  if (active) {
    const Act* qi = qkv_row(qkv, g, b, i, h, 0, HS);
    for (int d = 0; d < HS; ++d) {
      q[d] = detail::load_act(qi + d) * g.scale;
      acc[d] = 0.0f;
    }
  }
  const int last_key = min(g.T, first + kRows) - 1;  // the block's last row sees keys 0..last_key
  for (int k0 = 0; k0 <= last_key; k0 += KT) {
    load_kv_tile<HS>(ks, vs, qkv, g, b, h, k0);
    __syncthreads();
    if (active) {
      const int visible = min(KT, i - k0 + 1);  // keys k0 .. i of this tile
      for (int r = 0; r < visible; ++r) {
        float s = 0.0f;
        for (int d = 0; d < HS; ++d) s += q[d] * ks[r][d];
        if (s > m) {  // a new maximum: rescale what was summed against the old one
          const float c = expf(m - s);
          l *= c;
          for (int d = 0; d < HS; ++d) acc[d] *= c;
          m = s;
        }
        const float p = expf(s - m);
        l += p;
        const float pv = p * cursor.factor((static_cast<std::int64_t>(h) * g.T + i) * g.T + k0 + r);
        for (int d = 0; d < HS; ++d) acc[d] += pv * vs[r][d];
      }
    }
    __syncthreads();
  }
  if (active) {
    const float inv = 1.0f / l;
    Act* oi = out + (static_cast<std::int64_t>(b) * g.T + i) * g.C + h * HS;
    for (int d = 0; d < HS; ++d) detail::store_act(oi + d, acc[d] * inv);
    lse[static_cast<std::int64_t>(blockIdx.y) * g.T + i] = m + logf(l);
  }
}

// delta[bh, i] = sum_d dout[i, d] * out[i, d]: the softmax backward's row term (from the stored,
// for BF16 rounded, out: FlashAttention-2's choice; the tests bound the difference).
template <typename Act>
__global__ void flash_delta_kernel(float* delta, const Act* dout, const Act* out, Geometry g, int hs,
                                   std::int64_t rows) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const std::int64_t bh = r / g.T;
  const int i = static_cast<int>(r % g.T), b = static_cast<int>(bh / g.NH), h = static_cast<int>(bh % g.NH);
  const std::int64_t at = (static_cast<std::int64_t>(b) * g.T + i) * g.C + h * hs;
  float sum = 0.0f;
  for (int d = 0; d < hs; ++d) sum += detail::load_act(dout + at + d) * detail::load_act(out + at + d);
  delta[r] = sum;
}

// dq for one query row per thread: dq_i = scale * sum_j p_ij (mask_ij dp_ij - delta_i) k_j.
template <int HS, typename Act>
__global__ void flash_dq_kernel(Act* dqkv, const Act* qkv, const Act* dout, const float* lse, const float* delta,
                                Geometry g, MaskParams mask) {
  constexpr int KT = kTileRows<HS>;
  __shared__ float ks[KT][HS];
  __shared__ float vs[KT][HS];
  const int b = blockIdx.y / g.NH, h = blockIdx.y % g.NH;
  const int first = blockIdx.x * kRows, i = first + threadIdx.x;
  const bool active = i < g.T;
  float q[HS], dO[HS], dq[HS];
  float lse_i = 0.0f, delta_i = 0.0f;
  MaskCursor cursor(mask, b);
  if (active) {
    const Act* qi = qkv_row(qkv, g, b, i, h, 0, HS);
    const Act* doi = dout + (static_cast<std::int64_t>(b) * g.T + i) * g.C + h * HS;
    for (int d = 0; d < HS; ++d) {
      q[d] = detail::load_act(qi + d) * g.scale;
      dO[d] = detail::load_act(doi + d);
      dq[d] = 0.0f;
    }
    lse_i = lse[static_cast<std::int64_t>(blockIdx.y) * g.T + i];
    delta_i = delta[static_cast<std::int64_t>(blockIdx.y) * g.T + i];
  }
  const int last_key = min(g.T, first + kRows) - 1;
  for (int k0 = 0; k0 <= last_key; k0 += KT) {
    load_kv_tile<HS>(ks, vs, qkv, g, b, h, k0);
    __syncthreads();
    if (active) {
      const int visible = min(KT, i - k0 + 1);
      for (int r = 0; r < visible; ++r) {
        float s = 0.0f, dp = 0.0f;
        for (int d = 0; d < HS; ++d) {
          s += q[d] * ks[r][d];
          dp += dO[d] * vs[r][d];
        }
        const float f = cursor.factor((static_cast<std::int64_t>(h) * g.T + i) * g.T + k0 + r);
        const float ds = expf(s - lse_i) * (dp * f - delta_i);
        for (int d = 0; d < HS; ++d) dq[d] += ds * ks[r][d];
      }
    }
    __syncthreads();
  }
  if (active) {
    Act* dqi = dqkv + (static_cast<std::int64_t>(b) * g.T + i) * 3 * g.C + h * HS;
    for (int d = 0; d < HS; ++d) detail::store_act(dqi + d, dq[d] * g.scale);
  }
}

// dk and dv for one key row per thread, over the query rows that see it (i >= j):
// dv_j = sum_i mask_ij p_ij dout_i,  dk_j = sum_i p_ij (mask_ij dp_ij - delta_i) (scale q_i).
template <int HS, typename Act>
__global__ void flash_dkv_kernel(Act* dqkv, const Act* qkv, const Act* dout, const float* lse, const float* delta,
                                 Geometry g, MaskParams mask) {
  constexpr int QT = kTileRows<HS> / 2;  // four tiles: q, dout (and the row terms)
  __shared__ float qs[QT][HS];
  __shared__ float dos[QT][HS];
  __shared__ float lses[QT];
  __shared__ float deltas[QT];
  const int b = blockIdx.y / g.NH, h = blockIdx.y % g.NH;
  const int first = blockIdx.x * kRows, j = first + threadIdx.x;
  const bool active = j < g.T;
  float k[HS], v[HS], dk[HS], dv[HS];
  MaskCursor cursor(mask, b);
  if (active) {
    const Act* kj = qkv_row(qkv, g, b, j, h, 1, HS);
    const Act* vj = qkv_row(qkv, g, b, j, h, 2, HS);
    for (int d = 0; d < HS; ++d) {
      k[d] = detail::load_act(kj + d);
      v[d] = detail::load_act(vj + d);
      dk[d] = 0.0f;
      dv[d] = 0.0f;
    }
  }
  for (int q0 = (first / QT) * QT; q0 < g.T; q0 += QT) {  // query rows from the block's first key on
    for (int e = threadIdx.x; e < QT * HS; e += blockDim.x) {
      const int r = e / HS, d = e % HS, i = q0 + r;
      qs[r][d] = i < g.T ? detail::load_act(qkv_row(qkv, g, b, i, h, 0, HS) + d) * g.scale : 0.0f;
      dos[r][d] = i < g.T ? detail::load_act(dout + (static_cast<std::int64_t>(b) * g.T + i) * g.C + h * HS + d) : 0.0f;
    }
    for (int r = threadIdx.x; r < QT; r += blockDim.x) {
      const int i = q0 + r;
      lses[r] = i < g.T ? lse[static_cast<std::int64_t>(blockIdx.y) * g.T + i] : 0.0f;
      deltas[r] = i < g.T ? delta[static_cast<std::int64_t>(blockIdx.y) * g.T + i] : 0.0f;
    }
    __syncthreads();
    if (active) {
      for (int r = max(0, j - q0); r < QT && q0 + r < g.T; ++r) {  // rows i = q0 + r >= j
        float s = 0.0f, dp = 0.0f;
        for (int d = 0; d < HS; ++d) {
          s += qs[r][d] * k[d];
          dp += dos[r][d] * v[d];
        }
        const float p = expf(s - lses[r]);
        const float f = cursor.factor((static_cast<std::int64_t>(h) * g.T + q0 + r) * g.T + j);
        const float ds = p * (dp * f - deltas[r]);
        for (int d = 0; d < HS; ++d) {
          dv[d] += p * f * dos[r][d];
          dk[d] += ds * qs[r][d];
        }
      }
    }
    __syncthreads();
  }
  if (active) {
    Act* row = dqkv + (static_cast<std::int64_t>(b) * g.T + j) * 3 * g.C + h * HS;
    for (int d = 0; d < HS; ++d) {
      detail::store_act(row + g.C + d, dk[d]);
      detail::store_act(row + 2 * g.C + d, dv[d]);
    }
  }
}

struct FlashDims {
  std::int64_t B, T, C, NH, hs;
};

FlashDims check_dims(const TensorView& out_like, const TensorView& lse, const TensorView& qkv, int n_head) {
  detail::check_on_gpu(out_like, "out");
  detail::check_on_gpu(lse, "lse");
  detail::check_on_gpu(qkv, "qkv");
  ZT_CHECK(lse.dtype == DType::kF32, "flash attention's lse is F32 (a row statistic), not {}", dtype_name(lse.dtype));
  ZT_CHECK(qkv.shape.ndim() == 3 && n_head > 0, "qkv must be [B, T, 3C]");
  FlashDims d{qkv.shape[0], qkv.shape[1], qkv.shape[2] / 3, n_head, 0};
  ZT_CHECK(d.C * 3 == qkv.shape[2] && d.C % n_head == 0, "qkv [.., {}] is not 3C with C a multiple of {} heads",
           qkv.shape[2], n_head);
  d.hs = d.C / n_head;
  ZT_CHECK(flash_attention_supports(d.B, d.NH, d.hs),
           "flash attention has no kernel for head size {} (8-128, powers of 2) or B * n_head = {} (at most 65535)",
           d.hs, d.B * d.NH);
  ZT_CHECK(out_like.numel() == d.B * d.T * d.C, "out must be [B, T, C]");
  ZT_CHECK(lse.numel() == d.B * d.NH * d.T, "lse must be [B, n_head, T]");
  ZT_CHECK(d.T < (1 << 30), "T = {} exceeds the grid", d.T);
  return d;
}

template <typename Fn>
void with_head_size(std::int64_t hs, Fn&& fn) {
  switch (hs) {
    case 8: fn(std::integral_constant<int, 8>{}); break;
    case 16: fn(std::integral_constant<int, 16>{}); break;
    case 32: fn(std::integral_constant<int, 32>{}); break;
    case 64: fn(std::integral_constant<int, 64>{}); break;
    case 128: fn(std::integral_constant<int, 128>{}); break;
    default: ZT_CHECK(false, "head size {}", hs);
  }
}

}  // namespace

Geometry geometry_of(const FlashDims& d) {
  return Geometry{static_cast<int>(d.T), static_cast<int>(d.C), static_cast<int>(d.NH),
                  static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hs)))};
}

// The dropout on the probabilities, checked as the dropout kernels check theirs (p in [0, 1), a
// sample's n_head * T * T elements within the Philox counter), as the kernels take it.
MaskParams mask_of(const DropoutSpec& dropout, const FlashDims& d) {
  cpu::dropout_detail::check_spec(dropout, d.NH * d.T * d.T);
  return detail::mask_params(dropout);
}

// Whether the tensor-core kernels take these operands: BF16, a head size they are compiled for, and
// every base pointer 16-byte aligned (their tiles move in 16-byte chunks).
template <typename Act>
bool use_tensor_cores(const FlashDims& d, std::initializer_list<const void*> operands) {
  if (!std::is_same_v<Act, __nv_bfloat16> || !detail::tc_flash_supports(static_cast<int>(d.hs))) return false;
  for (const void* p : operands) {
    if (!detail::aligned16(p)) return false;
  }
  return true;
}

bool flash_attention_supports(std::int64_t batch, std::int64_t n_head, std::int64_t hs) {
  const bool compiled = hs == 8 || hs == 16 || hs == 32 || hs == 64 || hs == 128;
  return compiled && batch * n_head <= 65535;  // one grid row per (sample, head)
}

bool flash_attention_tensor_cores(DType activations, std::int64_t hs) {
  return activations == DType::kBF16 && detail::tc_flash_supports(static_cast<int>(hs));
}

void flash_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                             const DropoutSpec& dropout) {
  const DType dtype = detail::activation_dtype("flash_attention_forward", {out, qkv});
  const FlashDims d = check_dims(out, lse, qkv, n_head);
  const MaskParams mask = mask_of(dropout, d);
  if (d.B * d.T == 0) return;
  const cudaStream_t stream = detail::stream_of(ctx);
  const Geometry g = geometry_of(d);
  const dim3 grid(static_cast<unsigned>((d.T + kRows - 1) / kRows), static_cast<unsigned>(d.B * d.NH));
  detail::dispatch_activation(dtype, [&](auto act) {
    using Act = typename decltype(act)::type;
    Act* out_p = detail::act_data<Act>(out);
    const Act* qkv_p = detail::act_data<Act>(qkv);
    if constexpr (std::is_same_v<Act, __nv_bfloat16>) {
      if (use_tensor_cores<Act>(d, {out_p, qkv_p})) {
        detail::tc_flash_forward(stream, out_p, lse.as<float>(), qkv_p, static_cast<int>(d.B),
                                 static_cast<int>(d.hs), g, mask);
        return;
      }
    }
    with_head_size(d.hs, [&](auto hs) {
      flash_forward_kernel<decltype(hs)::value, Act><<<grid, kRows, 0, stream>>>(out_p, lse.as<float>(), qkv_p, g,
                                                                                mask);
    });
    ZT_CUDA_CHECK_LAUNCH();
  });
}

void flash_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out, TensorView qkv,
                              TensorView lse, int n_head, const DropoutSpec& dropout) {
  const DType dtype = detail::activation_dtype("flash_attention_backward", {dqkv, dout, out, qkv});
  const FlashDims d = check_dims(out, lse, qkv, n_head);
  detail::check_on_gpu(dqkv, "dqkv");
  detail::check_on_gpu(dout, "dout");
  ZT_CHECK(dqkv.numel() == qkv.numel(), "flash_attention_backward: dqkv must be shaped as qkv");
  ZT_CHECK(dout.numel() == out.numel(), "flash_attention_backward: dout must be shaped as out");
  const MaskParams mask = mask_of(dropout, d);
  if (d.B * d.T == 0) return;
  const cudaStream_t stream = detail::stream_of(ctx);
  const Geometry g = geometry_of(d);
  const std::int64_t rows = d.B * d.NH * d.T;
  Buffer delta = detail::resources_of(ctx).scratch(DType::kF32, rows);
  detail::dispatch_activation(dtype, [&](auto act) {
    using Act = typename decltype(act)::type;
    const Act* dout_p = detail::act_data<Act>(dout);
    const Act* qkv_p = detail::act_data<Act>(qkv);
    Act* dqkv_p = detail::act_data<Act>(dqkv);
    constexpr int kThreads = 256;
    flash_delta_kernel<<<detail::grid_for(rows, kThreads, INT32_MAX), kThreads, 0, stream>>>(
        delta.as<float>(), dout_p, detail::act_data<Act>(out), g, static_cast<int>(d.hs), rows);
    ZT_CUDA_CHECK_LAUNCH();
    const float* lse_p = lse.as<float>();
    if constexpr (std::is_same_v<Act, __nv_bfloat16>) {
      if (use_tensor_cores<Act>(d, {dqkv_p, qkv_p, dout_p})) {
        detail::tc_flash_backward(stream, dqkv_p, qkv_p, dout_p, lse_p, delta.as<float>(), static_cast<int>(d.B),
                                  static_cast<int>(d.hs), g, mask);
        return;
      }
    }
    const dim3 grid(static_cast<unsigned>((d.T + kRows - 1) / kRows), static_cast<unsigned>(d.B * d.NH));
    with_head_size(d.hs, [&](auto hs) {
      constexpr int HS = decltype(hs)::value;
      flash_dq_kernel<HS, Act><<<grid, kRows, 0, stream>>>(dqkv_p, qkv_p, dout_p, lse_p, delta.as<float>(), g, mask);
      ZT_CUDA_CHECK_LAUNCH();
      flash_dkv_kernel<HS, Act><<<grid, kRows, 0, stream>>>(dqkv_p, qkv_p, dout_p, lse_p, delta.as<float>(), g,
                                                            mask);
      ZT_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace zt::cuda
