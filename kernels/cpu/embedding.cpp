// Token + position embedding on the CPU. Backward is a scatter-add, where two positions can share a
// token row: threads split the C columns instead of the positions, and each walks every (b, t) in
// order, so every gradient element is summed by one thread in a fixed order (deterministic).
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstdint>

#include "engine/core/bf16.h"
#include "kernels/cpu/bf16_staging.h"

namespace zt::cpu {

namespace {

float widen(float v) { return v; }
float widen(bf16 v) { return bf16_to_float(v); }

// The forward into an fp32 out (the whole out, or a bf16 out's staged rows) from tables of type P.
template <typename P>
void embed_rows(const ExecContext& ctx, float* o, const std::int32_t* tok, const P* te, const P* pe, std::int64_t rows,
                std::int64_t T, std::int64_t C) {
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t bt = 0; bt < rows; ++bt) {
    const P* te_row = te + static_cast<std::int64_t>(tok[bt]) * C;
    const P* pe_row = pe + (bt % T) * C;
    float* orow = o + bt * C;
    for (std::int64_t c = 0; c < C; ++c) orow[c] = widen(te_row[c]) + widen(pe_row[c]);
  }
}

void embed_into_f32(const ExecContext& ctx, const TensorView& out, const TensorView& tokens, const TensorView& wte,
                    const TensorView& wpe, std::int64_t C) {
  const std::int64_t rows = tokens.numel(), T = tokens.shape[1];
  if (wte.dtype == DType::kBF16) {
    embed_rows(ctx, out.as<float>(), tokens.as<std::int32_t>(), wte.as<bf16>(), wpe.as<bf16>(), rows, T, C);
  } else {
    embed_rows(ctx, out.as<float>(), tokens.as<std::int32_t>(), wte.as<float>(), wpe.as<float>(), rows, T, C);
  }
}

// Columns per backward task. 64 floats (256 bytes) keeps each row segment a few cache lines.
constexpr std::int64_t kColumnBlock = 64;

EmbeddingDims check_dims(const TensorView& out_like, const TensorView& tokens, const TensorView& wte,
                         const TensorView& wpe, EmbeddingTables tables) {
  const EmbeddingDims d = embedding_dims(out_like, tokens, wte, wpe, tables);
  // Checked up front, outside the parallel loops: an exception must not leave an OpenMP region.
  const std::int32_t* tok = tokens.as<std::int32_t>();
  for (std::int64_t i = 0; i < d.B * d.T; ++i) {
    ZT_CHECK(tok[i] >= 0 && tok[i] < d.vocab, "token {} at position {} outside [0, {})", tok[i], i, d.vocab);
  }
  return d;
}

}  // namespace

void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe) {
  const EmbeddingDims d = check_dims(out, tokens, wte, wpe, EmbeddingTables::kParameters);
  if (out.dtype == DType::kBF16) {
    using detail::Access;
    detail::stage_rows(ctx, {{out, Access::kWrite}},
                       [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
                         embed_into_f32(ctx, v[0], detail::row_slice(tokens, first, n), wte, wpe, d.C);
                       });
    return;
  }
  embed_into_f32(ctx, out, tokens, wte, wpe, d.C);
}

void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens) {
  const EmbeddingDims d = check_dims(dout, tokens, dwte, dwpe, EmbeddingTables::kGradients);
  if (dout.dtype == DType::kBF16) {  // chunks of samples in order: the same (b, t) summation order
    using detail::Access;
    detail::stage_rows(ctx, {{dout, Access::kRead}},
                       [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
                         embedding_backward(ctx, dwte, dwpe, v[0], detail::row_slice(tokens, first, n));
                       });
    return;
  }
  const std::int64_t C = d.C;
  const float* g = dout.as<float>();
  const std::int32_t* tok = tokens.as<std::int32_t>();
  float* dte = dwte.as<float>();
  float* dpe = dwpe.as<float>();
  const std::int64_t num_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
    const std::int64_t c0 = blk * kColumnBlock;
    const std::int64_t width = std::min(kColumnBlock, C - c0);
    for (std::int64_t b = 0; b < d.B; ++b) {
      for (std::int64_t t = 0; t < d.T; ++t) {
        const std::int64_t bt = b * d.T + t;
        const float* grow = g + bt * C + c0;
        float* te_row = dte + static_cast<std::int64_t>(tok[bt]) * C + c0;
        float* pe_row = dpe + t * C + c0;
        for (std::int64_t c = 0; c < width; ++c) {
          te_row[c] += grow[c];
          pe_row[c] += grow[c];
        }
      }
    }
  }
}

}  // namespace zt::cpu
