// The chunk loops (see the header).
#include "models/vocab_chunk_passes.h"

#include "kernels/ops.h"
#include "models/kernel_params.h"
#include "models/unit_scope.h"

namespace zt {

namespace {

// The chunks take turns in the second fp32-copy slot; the first holds the unit in use across the
// loop (GPT-2's wpe in the embedding, the final norm in the head).
constexpr int kChunkSlot = 1;

TensorView chunk_logits(const ChunkedHeadViews& h, std::int64_t rows, std::int64_t width) {
  return TensorView{h.logits.data, h.logits.dtype, h.logits.device, Shape{rows, width}};
}

}  // namespace

void chunked_embedding_forward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, TensorView out,
                               TensorView tokens, TensorView first, TensorView positions) {
  // Each chunk writes the positions of its own tokens, with the whole table's bits.
  ops::embedding_forward_rows(ctx, out, tokens, first, positions, 0, chunks.padded_vocab());
  for (int c = 1; c < chunks.count(); ++c) {
    with_params(store, chunks.kernel_params(), chunks.unit(c), Pass::kForward, kChunkSlot, [&](TensorView p) {
      ops::embedding_forward_rows(ctx, out, tokens, chunks.rows_of(p, c), positions, c * chunks.columns(),
                                  chunks.padded_vocab());
    });
  }
}

void chunked_head_forward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, const ChunkedHeadViews& h,
                          TensorView targets, int vocab_size, float* logits_out) {
  const std::int64_t rows = h.losses.numel();
  for (int c = 0; c < chunks.count(); ++c) {
    const std::int64_t begin = c * chunks.columns();
    TensorView logits;
    with_params(store, chunks.kernel_params(), chunks.unit(c), Pass::kForward, kChunkSlot, [&](TensorView p) {
      const TensorView w = chunks.rows_of(p, c);
      logits = chunk_logits(h, rows, w.shape[0]);
      ops::matmul_forward(ctx, logits, h.lnf, w, ops::WeightLayout::kOutIn, TensorView{});
    });
    if (logits_out != nullptr) copy_logits_out(ctx, logits, begin, vocab_size, logits_out);
    ops::cross_entropy_chunk_stats(ctx, h.row_max, h.row_sum, h.target_logit, logits, targets, begin, vocab_size,
                                   c == 0);
  }
  ops::cross_entropy_chunk_loss(ctx, h.losses, h.row_max, h.row_max, h.row_sum, h.target_logit);
}

void chunked_head_backward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, const ChunkedHeadViews& h,
                           TensorView dlnf, TensorView targets, int vocab_size, float dloss) {
  const std::int64_t rows = h.losses.numel();
  const int last = chunks.count() - 1;
  for (int c = last; c >= 0; --c) {
    const int unit = chunks.unit(c);
    with_params(store, chunks.kernel_params(), unit, Pass::kBackward, kChunkSlot, [&](TensorView p) {
      const TensorView w = chunks.rows_of(p, c);
      const TensorView logits = chunk_logits(h, rows, w.shape[0]);
      ops::matmul_forward(ctx, logits, h.lnf, w, ops::WeightLayout::kOutIn, TensorView{});  // again
      ops::cross_entropy_chunk_backward(ctx, logits, logits, h.row_max, targets, c * chunks.columns(), dloss,
                                        vocab_size);
      // The head's round is reduced now, not after the blocks.
      add_grads(store, unit, chunks.head_grad(store, unit), GradRound::kLast, [&](TensorView grad) {
        ops::matmul_backward(ctx, c == last ? dlnf : h.dlnf_part, chunks.rows_of(grad, c), TensorView{}, logits, h.lnf,
                             w, ops::WeightLayout::kOutIn);
        if (c != last) ops::residual_forward(ctx, dlnf, dlnf, h.dlnf_part);
      });
    });
  }
}

void chunked_embedding_backward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, TensorView dresid,
                                TensorView tokens) {
  for (int c = 0; c < chunks.count(); ++c) {
    const int unit = chunks.unit(c);
    add_grads(store, unit, chunks.zeroed_grad(unit), GradRound::kLast, [&](TensorView grad) {
      const TensorView positions = c == 0 ? chunks.position_grad(grad) : TensorView{};
      ops::embedding_backward_rows(ctx, chunks.rows_of(grad, c), positions, dresid, tokens, c * chunks.columns(),
                                   chunks.padded_vocab());
    });
  }
}

}  // namespace zt
