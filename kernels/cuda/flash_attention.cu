// Flash attention's host side: operand checks, and the dispatch between the tensor-core kernels
// (flash_attention_tc.cu, BF16 activations at head sizes 16-128) and the CUDA-core kernels
// (flash_attention_kernels.cuh, every dtype and head size).
#include "kernels/cuda/flash_attention.h"

#include <cmath>
#include <type_traits>

#include "kernels/contracts/operand_checks.h"  // fused_attention_dims, flash_attention_shape_supported
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dropout_mask.cuh"
#include "kernels/cuda/flash_attention_kernels.cuh"
#include "kernels/cuda/flash_attention_tc.cuh"

namespace zt::cuda {

namespace {

using detail::MaskParams;
using detail::flash::flash_delta_kernel;
using detail::flash::flash_dkv_kernel;
using detail::flash::flash_dq_kernel;
using detail::flash::flash_forward_kernel;
using detail::flash::Geometry;
using detail::flash::kRows;

struct FlashDims {
  std::int64_t B, T, C, NH, hs, NKV;
};

FlashDims check_dims(const TensorView& out_like, const TensorView& lse, const TensorView& qkv, int n_head,
                     int n_kv_head) {
  detail::check_on_gpu(out_like, "out");
  detail::check_on_gpu(lse, "lse");
  detail::check_on_gpu(qkv, "qkv");
  ZT_CHECK(lse.dtype == DType::kF32, "flash attention's lse is F32 (a row statistic), not {}", dtype_name(lse.dtype));
  // The shapes, grouped-query heads included, as the CPU's attention checks them.
  const AttentionDims a = fused_attention_dims(out_like, qkv, n_head, n_kv_head);
  FlashDims d{a.B, a.T, a.C, a.NH, a.hs, a.NKV};
  ZT_CHECK(flash_attention_supports(d.B, d.NH, d.hs),
           "flash attention has no kernel for head size {} (8-128, powers of 2) or B * n_head = {} (at most 65535)",
           d.hs, d.B * d.NH);
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

Geometry geometry_of(const FlashDims& d) {
  return detail::flash_geometry(static_cast<int>(d.T), static_cast<int>(d.NH), static_cast<int>(d.NKV),
                                static_cast<int>(d.hs));
}

// The dropout on the probabilities, checked as the dropout kernels check theirs (p in [0, 1), a
// sample's n_head * T * T elements within the Philox counter), as the kernels take it.
MaskParams mask_of(const DropoutSpec& dropout, const FlashDims& d) {
  dropout_rules::check_spec(dropout, d.NH * d.T * d.T);
  return detail::mask_params(dropout);
}

// Whether the tensor-core kernels take these operands: flash_attention_tensor_cores, and every base
// pointer 16-byte aligned (their tiles move in 16-byte chunks).
template <typename Act>
bool use_tensor_cores(const FlashDims& d, std::initializer_list<const void*> operands) {
  if (!flash_attention_tensor_cores(detail::act_dtype_of<Act>(), d.hs)) return false;
  for (const void* p : operands) {
    if (!detail::aligned16(p)) return false;
  }
  return true;
}

}  // namespace

bool flash_attention_supports(std::int64_t batch, std::int64_t n_head, std::int64_t hs) {
  return flash_attention_shape_supported(batch, n_head, hs);  // with_head_size compiles these
}

bool flash_attention_tensor_cores(DType activations, std::int64_t hs) {
  return activations == DType::kBF16 && detail::tc_flash_supports(static_cast<int>(hs));
}

void flash_attention_forward(const ExecContext& ctx, TensorView out, TensorView lse, TensorView qkv, int n_head,
                             const DropoutSpec& dropout, int n_kv_head) {
  const DType dtype = detail::activation_dtype("flash_attention_forward", {out, qkv});
  const FlashDims d = check_dims(out, lse, qkv, n_head, n_kv_head);
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
        detail::tc_flash_forward(stream, out_p, lse.as<float>(), qkv_p, static_cast<int>(d.B), static_cast<int>(d.hs),
                                 g, mask);
        return;
      }
    }
    with_head_size(d.hs, [&](auto hs) {
      flash_forward_kernel<decltype(hs)::value, Act>
          <<<grid, kRows, 0, stream>>>(out_p, lse.as<float>(), qkv_p, g, mask);
    });
    ZT_CUDA_CHECK_LAUNCH();
  });
}

void flash_attention_backward(const ExecContext& ctx, TensorView dqkv, TensorView dout, TensorView out, TensorView qkv,
                              TensorView lse, int n_head, const DropoutSpec& dropout, int n_kv_head) {
  const DType dtype = detail::activation_dtype("flash_attention_backward", {dqkv, dout, out, qkv});
  const FlashDims d = check_dims(out, lse, qkv, n_head, n_kv_head);
  detail::check_on_gpu(dqkv, "dqkv");
  detail::check_on_gpu(dout, "dout");
  ZT_CHECK(dqkv.numel() == qkv.numel(), "flash_attention_backward: dqkv must be shaped as qkv");
  ZT_CHECK(dout.numel() == out.numel(), "flash_attention_backward: dout must be shaped as out");
  const MaskParams mask = mask_of(dropout, d);
  if (d.B * d.T == 0) return;
  const cudaStream_t stream = detail::stream_of(ctx);
  const Geometry g = geometry_of(d);
  const std::int64_t rows = d.B * d.NH * d.T;
  // kernel_scratch::flash_attention_backward_bytes counts it.
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
    const unsigned row_blocks = static_cast<unsigned>((d.T + kRows - 1) / kRows);
    const dim3 q_grid(row_blocks, static_cast<unsigned>(d.B * d.NH)),
        kv_grid(row_blocks, static_cast<unsigned>(d.B * d.NKV));
    with_head_size(d.hs, [&](auto hs) {
      constexpr int HS = decltype(hs)::value;
      flash_dq_kernel<HS, Act><<<q_grid, detail::flash::kPairThreads, 0, stream>>>(dqkv_p, qkv_p, dout_p, lse_p,
                                                                                   delta.as<float>(), g, mask);
      ZT_CUDA_CHECK_LAUNCH();
      flash_dkv_kernel<HS, Act><<<kv_grid, detail::flash::kPairThreads, 0, stream>>>(dqkv_p, qkv_p, dout_p, lse_p,
                                                                                     delta.as<float>(), g, mask);
      ZT_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace zt::cuda
