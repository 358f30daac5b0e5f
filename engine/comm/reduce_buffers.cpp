// convert_copy and ordered_sum.
#include "engine/comm/reduce_buffers.h"

#include <cstring>

#include "engine/core/bf16.h"
#include "engine/core/check.h"

namespace zt {

void convert_copy(TensorView dst, TensorView src) {
  ZT_CHECK(dst.numel() == src.numel());
  const std::int64_t n = src.numel();
  if (dst.dtype == src.dtype) {
    if (dst.data != src.data) std::memcpy(dst.data, src.data, src.size_bytes());
  } else if (dst.dtype == DType::kF32 && src.dtype == DType::kBF16) {
    const bf16* s = src.as<bf16>();
    float* d = dst.as<float>();
    for (std::int64_t i = 0; i < n; ++i) d[i] = bf16_to_float(s[i]);
  } else if (dst.dtype == DType::kBF16 && src.dtype == DType::kF32) {
    const float* s = src.as<float>();
    bf16* d = dst.as<bf16>();
    for (std::int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(s[i]);
  } else {
    ZT_CHECK(false, "collectives move F32 or BF16 only");
  }
}

void ordered_sum(const float* in, int parts, std::int64_t n, float scale, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    float acc = in[i];
    for (int r = 1; r < parts; ++r) acc += in[r * n + i];
    out[i] = acc * scale;
  }
}

}  // namespace zt
