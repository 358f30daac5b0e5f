// Token + position embedding on the CPU. Backward is a scatter-add, where two positions can share a
// token row: threads split the C columns instead of the positions, and each walks every (b, t) in
// order, so every gradient element is summed by one thread in a fixed order (deterministic).
#include "kernels/cpu/embedding.h"

#include <algorithm>
#include <cstdint>

#include "engine/base/core/bf16.h"
#include "kernels/cpu/bf16_staging.h"

namespace zt::cpu {

namespace {

float widen(float v) { return v; }
float widen(bf16 v) { return bf16_to_float(v); }

// The forward into an fp32 out (the whole out, or a bf16 out's staged rows) from tables of type P.
// Table rows [row_begin, row_begin + table_rows) of the vocabulary are in `te`; positions whose
// token is elsewhere are left untouched.
template <typename P>
void embed_rows(const ExecContext& ctx, float* o, const std::int32_t* tok, const P* te, const P* pe, std::int64_t rows,
                std::int64_t T, std::int64_t C, std::int64_t row_begin, std::int64_t table_rows) {
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t bt = 0; bt < rows; ++bt) {
    const std::int64_t r = static_cast<std::int64_t>(tok[bt]) - row_begin;
    if (r < 0 || r >= table_rows) continue;
    const P* te_row = te + r * C;
    if (pe == nullptr) {  // no position table (rotary models): the token's row alone
      for (std::int64_t c = 0; c < C; ++c) o[bt * C + c] = widen(te_row[c]);
      continue;
    }
    const P* pe_row = pe + (bt % T) * C;
    float* orow = o + bt * C;
    for (std::int64_t c = 0; c < C; ++c) orow[c] = widen(te_row[c]) + widen(pe_row[c]);
  }
}

void embed_into_f32(const ExecContext& ctx, const TensorView& out, const TensorView& tokens, const TensorView& wte,
                    const TensorView& wpe, std::int64_t C, std::int64_t row_begin) {
  const std::int64_t rows = tokens.numel(), T = tokens.shape[1], table_rows = wte.shape[0];
  if (wte.dtype == DType::kBF16) {
    embed_rows(ctx, out.as<float>(), tokens.as<std::int32_t>(), wte.as<bf16>(),
               wpe.data == nullptr ? nullptr : wpe.as<bf16>(), rows, T, C, row_begin, table_rows);
  } else {
    embed_rows(ctx, out.as<float>(), tokens.as<std::int32_t>(), wte.as<float>(),
               wpe.data == nullptr ? nullptr : wpe.as<float>(), rows, T, C, row_begin, table_rows);
  }
}

// Columns per backward task. 64 floats (256 bytes) keeps each row segment a few cache lines.
constexpr std::int64_t kColumnBlock = 64;

// `vocab` (-1: the rows of wte) is the vocabulary the tokens are checked against; wte may hold rows
// [row_begin, row_begin + R) of it.
EmbeddingDims check_dims(const TensorView& out_like, const TensorView& tokens, const TensorView& wte,
                         const TensorView& wpe, EmbeddingTables tables, std::int64_t row_begin = 0,
                         std::int64_t vocab = -1) {
  EmbeddingDims d = embedding_dims(out_like, tokens, wte, wpe, tables);
  if (vocab >= 0) {
    ZT_CHECK(row_begin >= 0 && row_begin + d.vocab <= vocab, "table rows [{}, {}) outside the vocabulary of {}",
             row_begin, row_begin + d.vocab, vocab);
    d.vocab = vocab;
  }
  // Checked up front, outside the parallel loops: an exception must not leave an OpenMP region.
  const std::int32_t* tok = tokens.as<std::int32_t>();
  for (std::int64_t i = 0; i < d.B * d.T; ++i) {
    ZT_CHECK(tok[i] >= 0 && tok[i] < d.vocab, "token {} at position {} outside [0, {})", tok[i], i, d.vocab);
  }
  return d;
}

}  // namespace

void embedding_forward(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte, TensorView wpe) {
  embedding_forward_rows(ctx, out, tokens, wte, wpe, 0, wte.shape.ndim() == 2 ? wte.shape[0] : -1);
}

void embedding_forward_rows(const ExecContext& ctx, TensorView out, TensorView tokens, TensorView wte_rows,
                            TensorView wpe, std::int64_t row_begin, std::int64_t vocab) {
  // Without a position table (wpe without data) the checks take a stand-in of its shape.
  if (wpe.data == nullptr && tokens.shape.ndim() == 2 && wte_rows.shape.ndim() == 2) {
    wpe = TensorView{nullptr, wte_rows.dtype, wte_rows.device, Shape{tokens.shape[1], wte_rows.shape[1]}};
  }
  const EmbeddingDims d = check_dims(out, tokens, wte_rows, wpe, EmbeddingTables::kParameters, row_begin, vocab);
  if (out.dtype == DType::kBF16) {
    // A chunk's staging is read as well as written: the positions of other chunks keep their
    // values (exactly: bf16 widens and rounds back unchanged). The whole table writes every one.
    using detail::Access;
    const bool whole_table = row_begin == 0 && wte_rows.shape[0] == d.vocab;
    detail::stage_rows(ctx, {{out, whole_table ? Access::kWrite : Access::kReadWrite}},
                       [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
                         embed_into_f32(ctx, v[0], detail::row_slice(tokens, first, n), wte_rows, wpe, d.C, row_begin);
                       });
    return;
  }
  embed_into_f32(ctx, out, tokens, wte_rows, wpe, d.C, row_begin);
}

void embedding_backward(const ExecContext& ctx, TensorView dwte, TensorView dwpe, TensorView dout, TensorView tokens) {
  embedding_backward_rows(ctx, dwte, dwpe, dout, tokens, 0, dwte.shape.ndim() == 2 ? dwte.shape[0] : -1);
}

void embedding_backward_rows(const ExecContext& ctx, TensorView dwte_rows, TensorView dwpe, TensorView dout,
                             TensorView tokens, std::int64_t row_begin, std::int64_t vocab) {
  const bool with_wpe = dwpe.data != nullptr;
  // Without dwpe the checks take a stand-in of its shape (one row per position).
  const TensorView wpe_like =
      with_wpe ? dwpe : TensorView{nullptr, DType::kF32, dout.device, Shape{tokens.shape[1], dwte_rows.shape[1]}};
  const EmbeddingDims d = check_dims(dout, tokens, dwte_rows, wpe_like, EmbeddingTables::kGradients, row_begin, vocab);
  if (dout.dtype == DType::kBF16) {  // chunks of samples in order: the same (b, t) summation order
    using detail::Access;
    detail::stage_rows(
        ctx, {{dout, Access::kRead}}, [&](std::int64_t first, std::int64_t n, std::span<const TensorView> v) {
          embedding_backward_rows(ctx, dwte_rows, dwpe, v[0], detail::row_slice(tokens, first, n), row_begin, vocab);
        });
    return;
  }
  const std::int64_t C = d.C, table_rows = dwte_rows.shape[0];
  const float* g = dout.as<float>();
  const std::int32_t* tok = tokens.as<std::int32_t>();
  float* dte = dwte_rows.as<float>();
  float* dpe = with_wpe ? dwpe.as<float>() : nullptr;
  const std::int64_t num_blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for num_threads(ctx.num_threads) schedule(static)
  for (std::int64_t blk = 0; blk < num_blocks; ++blk) {
    const std::int64_t c0 = blk * kColumnBlock;
    const std::int64_t width = std::min(kColumnBlock, C - c0);
    for (std::int64_t b = 0; b < d.B; ++b) {
      for (std::int64_t t = 0; t < d.T; ++t) {
        const std::int64_t bt = b * d.T + t;
        const float* grow = g + bt * C + c0;
        const std::int64_t r = static_cast<std::int64_t>(tok[bt]) - row_begin;
        if (r >= 0 && r < table_rows) {
          float* te_row = dte + r * C + c0;
          for (std::int64_t c = 0; c < width; ++c) te_row[c] += grow[c];
        }
        if (dpe != nullptr) {
          float* pe_row = dpe + t * C + c0;
          for (std::int64_t c = 0; c < width; ++c) pe_row[c] += grow[c];
        }
      }
    }
  }
}

}  // namespace zt::cpu
