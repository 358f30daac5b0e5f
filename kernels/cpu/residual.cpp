// Element-wise adds on the CPU: the residual connection's forward and dst += src accumulation.
// bf16 destinations are summed in fp32 and rounded to nearest even once (zt::float_to_bf16).
#include "kernels/cpu/residual.h"

#include <cstdint>

#include "engine/base/core/bf16.h"
#include "kernels/cpu/bf16_staging.h"

namespace zt::cpu {

namespace {
// Elements per parallel task.
constexpr std::int64_t kBlock = 16384;
}  // namespace

void residual_forward(const ExecContext& ctx, TensorView out, TensorView a, TensorView b) {
  ZT_CHECK(a.numel() == out.numel() && b.numel() == out.numel(), "residual_forward: element counts differ ({}, {}, {})",
           out.numel(), a.numel(), b.numel());
  if (activation_dtype("residual_forward", {out, a, b}) == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(
        ctx,
        {{detail::as_rows(out, 1), Access::kWrite},
         {detail::as_rows(a, 1), Access::kRead},
         {detail::as_rows(b, 1), Access::kRead}},
        [&](std::int64_t, std::int64_t, std::span<const TensorView> v) { residual_forward(ctx, v[0], v[1], v[2]); });
    return;
  }
  const std::int64_t n = out.numel();
  float* o = out.as<float>();
  const float* x = a.as<float>();
  const float* y = b.as<float>();
  const std::int64_t num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
    const std::int64_t end = blk * kBlock + kBlock < n ? blk * kBlock + kBlock : n;
    // out may alias a or b; every element is read before it is written.
#pragma GCC ivdep
    for (std::int64_t i = blk * kBlock; i < end; ++i) o[i] = x[i] + y[i];
  }
}

void accumulate_into(const ExecContext& ctx, TensorView dst, TensorView src) {
  ZT_CHECK(src.dtype == DType::kF32, "accumulate_into: src must be F32, is {}", dtype_name(src.dtype));
  ZT_CHECK(dst.dtype == DType::kF32 || dst.dtype == DType::kBF16, "accumulate_into: dst must be F32 or BF16, is {}",
           dtype_name(dst.dtype));
  ZT_CHECK(dst.numel() == src.numel(), "accumulate_into: dst has {} elements, src {}", dst.numel(), src.numel());
  const std::int64_t n = dst.numel();
  const float* s = src.as<float>();
  if (dst.dtype == DType::kF32) {
    float* d = dst.as<float>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) d[i] += s[i];
    return;
  }
  bf16* d = dst.as<bf16>();
  const std::int64_t num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
    const std::int64_t end = blk * kBlock + kBlock < n ? blk * kBlock + kBlock : n;
    for (std::int64_t i = blk * kBlock; i < end; ++i) d[i] = float_to_bf16(bf16_to_float(d[i]) + s[i]);
  }
}

void scale(const ExecContext& ctx, TensorView x, float factor) {
  ZT_CHECK(x.dtype == DType::kF32, "scale: x must be F32, is {}", dtype_name(x.dtype));
  float* d = x.as<float>();
  const std::int64_t n = x.numel();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) d[i] *= factor;
}

}  // namespace zt::cpu
