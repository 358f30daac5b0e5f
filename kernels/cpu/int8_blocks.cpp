// Blockwise int8 quantization on the CPU (the rule: kernels/contracts/int8_blocks.h), one block of
// 256 values per iteration, blocks in parallel. Built with -ffp-contract=off (kernels/CMakeLists.txt):
// the CUDA twin rounds every product and sum, so no multiply-add may fuse here either.
#include "kernels/cpu/int8_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "engine/base/core/bf16.h"
#include "engine/base/core/check.h"
#include "kernels/contracts/int8_blocks.h"

namespace zt::cpu {

namespace {

using int8_blocks::kBlock;

float load(const TensorView& x, std::int64_t i) {
  return x.dtype == DType::kF32 ? x.as<float>()[i] : bf16_to_float(x.as<bf16>()[i]);
}

void check_packed(const TensorView& packed, std::int64_t n, const char* op) {
  ZT_CHECK(packed.dtype == DType::kI32 && packed.numel() == int8_blocks::packed_words(n),
           "{}: packed form of {} values must be I32 [{}], got {} [{}]", op, n, int8_blocks::packed_words(n),
           dtype_name(packed.dtype), packed.numel());
}

}  // namespace

void quantize_int8_blocks(const ExecContext& ctx, TensorView src, TensorView packed) {
  const std::int64_t n = src.numel();
  ZT_CHECK(src.dtype == DType::kF32 || src.dtype == DType::kBF16, "quantize_int8_blocks: src must be F32 or BF16");
  check_packed(packed, n, "quantize_int8_blocks");
  if (n == 0) return;  // an empty chunk (a rank's share of a small tensor): no words, maybe no pointer
  const std::int64_t blocks = int8_blocks::num_blocks(n);
  auto* scales = static_cast<float*>(packed.data);  // the words' first part is fp32 bits
  auto* codes = reinterpret_cast<std::int8_t*>(scales + blocks);
  std::memset(codes, 0, static_cast<std::size_t>(4 * ((n + 3) / 4)));  // the last word's padding
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
    float absmax = 0.0f;
    bool finite = true;
    for (std::int64_t i = begin; i < end; ++i) {
      const float x = load(src, i);
      finite = finite && std::isfinite(x);
      absmax = std::max(absmax, std::fabs(x));
    }
    const float scale = finite ? absmax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    scales[b] = scale;
    for (std::int64_t i = begin; i < end; ++i) {
      const float q = scale > 0.0f ? std::clamp(std::rint(load(src, i) / scale), -127.0f, 127.0f) : 0.0f;
      codes[i] = static_cast<std::int8_t>(q);
    }
  }
}

void dequantize_int8_blocks(const ExecContext& ctx, TensorView packed, TensorView dst, bool accumulate) {
  const std::int64_t n = dst.numel();
  ZT_CHECK(dst.dtype == DType::kF32 || (dst.dtype == DType::kBF16 && !accumulate),
           "dequantize_int8_blocks: dst must be F32, or BF16 when not accumulating");
  check_packed(packed, n, "dequantize_int8_blocks");
  const std::int64_t blocks = int8_blocks::num_blocks(n);
  const auto* scales = static_cast<const float*>(packed.data);
  const auto* codes = reinterpret_cast<const std::int8_t*>(scales + blocks);
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
    const float scale = scales[b];
    if (dst.dtype == DType::kBF16) {
      bf16* d = static_cast<bf16*>(dst.data);
      for (std::int64_t i = begin; i < end; ++i) d[i] = float_to_bf16(static_cast<float>(codes[i]) * scale);
    } else if (accumulate) {
      float* d = static_cast<float*>(dst.data);
      for (std::int64_t i = begin; i < end; ++i) d[i] += static_cast<float>(codes[i]) * scale;
    } else {
      float* d = static_cast<float*>(dst.data);
      for (std::int64_t i = begin; i < end; ++i) d[i] = static_cast<float>(codes[i]) * scale;
    }
  }
}

}  // namespace zt::cpu
