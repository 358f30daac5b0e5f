// RoPE on the CPU: the cos/sin of every (t, i) once per call, then a row per task; bf16 rows staged
// through fp32 (read and written: the rotation is in place).
#include "kernels/cpu/rope.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/contracts/operand_checks.h"  // rope_dims
#include "kernels/contracts/rope_angles.h"
#include "kernels/cpu/bf16_staging.h"

namespace zt::cpu {

namespace {

// sign +1: forward, -1: backward (the transpose). Row r of the rows given is at position first +
// r % T (whole sequences only).
void rotate_f32(const ExecContext& ctx, float* x, std::int64_t rows, std::int64_t T, std::int64_t W, int n_heads,
                int head_size, const RopeFrequencies& freq, float sign, std::int64_t first) {
  const int half = head_size / 2;
  // Each frequency once (a power, and llama3's blend), not once per position: rope_angle's product
  // with the same operands.
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) inv_freq[static_cast<std::size_t>(i)] = rope_inv_freq(i, head_size, freq);
  std::vector<float> cos_t(static_cast<std::size_t>(T * half)), sin_t(cos_t.size());
  for (std::int64_t t = 0; t < T; ++t) {
    for (int i = 0; i < half; ++i) {
      const float a = static_cast<float>(first + t) * inv_freq[static_cast<std::size_t>(i)];
      cos_t[static_cast<std::size_t>(t * half + i)] = std::cos(a);
      sin_t[static_cast<std::size_t>(t * half + i)] = sign * std::sin(a);
    }
  }
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* c = cos_t.data() + (r % T) * half;
    const float* s = sin_t.data() + (r % T) * half;
    for (int h = 0; h < n_heads; ++h) {
      float* x1 = x + r * W + static_cast<std::int64_t>(h) * head_size;
      float* x2 = x1 + half;
      for (int i = 0; i < half; ++i) {
        const float a = x1[i], b = x2[i];
        x1[i] = a * c[i] - b * s[i];
        x2[i] = b * c[i] + a * s[i];
      }
    }
  }
}

void rotate(const ExecContext& ctx, const char* op, TensorView x, int n_heads, int head_size,
            const RopeFrequencies& freq, float sign, std::int64_t first) {
  const RopeDims d = rope_dims(x, n_heads, head_size, freq);
  if (activation_dtype(op, {x}) == DType::kBF16) {
    // Whole sequences per staged chunk (rows of T positions), so row r's position stays r % T.
    using detail::Access;
    const TensorView seqs = detail::as_rows(x, d.T * d.W);
    detail::stage_rows(ctx, {{seqs, Access::kReadWrite}},
                       [&](std::int64_t, std::int64_t n, std::span<const TensorView> v) {
                         rotate_f32(ctx, v[0].as<float>(), n * d.T, d.T, d.W, n_heads, head_size, freq, sign, first);
                       });
    return;
  }
  rotate_f32(ctx, x.as<float>(), d.B * d.T, d.T, d.W, n_heads, head_size, freq, sign, first);
}

}  // namespace

void rope_forward(const ExecContext& ctx, TensorView x, int n_heads, int head_size, const RopeFrequencies& freq,
                  std::int64_t first_position) {
  rotate(ctx, "rope_forward", x, n_heads, head_size, freq, 1.0f, first_position);
}

void rope_backward(const ExecContext& ctx, TensorView dx, int n_heads, int head_size, const RopeFrequencies& freq) {
  rotate(ctx, "rope_backward", dx, n_heads, head_size, freq, -1.0f, 0);
}

}  // namespace zt::cpu
