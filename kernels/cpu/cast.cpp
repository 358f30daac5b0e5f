// fp32 <-> bf16 buffer conversions on the CPU (mixed-precision parameter copies, checkpoints).
// Rounding is zt::float_to_bf16's (nearest even, NaN/Inf kept) so every path rounds the same way.
#include "kernels/cpu/cast.h"

#include <cstdint>
#include <cstring>

#include "engine/base/core/bf16.h"

namespace zt::cpu {

namespace {
// Elements per parallel task.
constexpr std::int64_t kBlock = 16384;
}  // namespace

void cast(const ExecContext& ctx, TensorView dst, TensorView src) {
  ZT_CHECK(dst.numel() == src.numel(), "cast: dst has {} elements, src {}", dst.numel(), src.numel());
  const std::int64_t n = src.numel();
  if (dst.dtype == src.dtype) {
    if (n > 0 && dst.data != src.data) std::memcpy(dst.data, src.data, src.size_bytes());
    return;
  }
  const std::int64_t num_blocks = (n + kBlock - 1) / kBlock;
  if (dst.dtype == DType::kBF16 && src.dtype == DType::kF32) {
    bf16* d = dst.as<bf16>();
    const float* s = src.as<float>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
    for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
      const std::int64_t end = blk * kBlock + kBlock < n ? blk * kBlock + kBlock : n;
      for (std::int64_t i = blk * kBlock; i < end; ++i) d[i] = float_to_bf16(s[i]);
    }
    return;
  }
  ZT_CHECK(dst.dtype == DType::kF32 && src.dtype == DType::kBF16, "cast from {} to {} is not supported",
           dtype_name(src.dtype), dtype_name(dst.dtype));
  float* d = dst.as<float>();
  const bf16* s = src.as<bf16>();
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
    const std::int64_t end = blk * kBlock + kBlock < n ? blk * kBlock + kBlock : n;
    for (std::int64_t i = blk * kBlock; i < end; ++i) d[i] = bf16_to_float(s[i]);
  }
}

}  // namespace zt::cpu
