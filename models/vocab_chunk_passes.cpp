// The chunk loops (see the header).
#include "models/vocab_chunk_passes.h"

#include "kernels/ops.h"
#include "models/kernel_params.h"

namespace zt {

namespace {

TensorView chunk_logits(const ChunkedHeadViews& h, std::int64_t rows, std::int64_t width) {
  return TensorView{h.logits.data, h.logits.dtype, h.logits.device, Shape{rows, width}};
}

}  // namespace

void chunked_embedding_forward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, TensorView out,
                               TensorView tokens, TensorView first, TensorView positions) {
  // Each chunk writes the positions of its own tokens, with the whole table's bits.
  ops::embedding_forward_rows(ctx, out, tokens, first, positions, 0, chunks.padded_vocab());
  for (int c = 1; c < chunks.count(); ++c) {
    ops::embedding_forward_rows(ctx, out, tokens, chunks.acquire(store, c, Pass::kForward), positions,
                                c * chunks.columns(), chunks.padded_vocab());
    store.release_params(chunks.unit(c), Pass::kForward);
  }
}

void chunked_head_forward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, const ChunkedHeadViews& h,
                          TensorView targets, int vocab_size, float* logits_out) {
  const std::int64_t rows = h.losses.numel();
  for (int c = 0; c < chunks.count(); ++c) {
    const std::int64_t begin = c * chunks.columns();
    const TensorView w = chunks.acquire(store, c, Pass::kForward);
    const TensorView logits = chunk_logits(h, rows, w.shape[0]);
    ops::matmul_forward(ctx, logits, h.lnf, w, ops::WeightLayout::kOutIn, TensorView{});
    store.release_params(chunks.unit(c), Pass::kForward);
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
    const TensorView w = chunks.acquire(store, c, Pass::kBackward);
    const TensorView logits = chunk_logits(h, rows, w.shape[0]);
    ops::matmul_forward(ctx, logits, h.lnf, w, ops::WeightLayout::kOutIn, TensorView{});  // again
    ops::cross_entropy_chunk_backward(ctx, logits, logits, h.row_max, targets, c * chunks.columns(), dloss, vocab_size);
    const TensorView grad = chunks.head_grad(store, unit);
    ops::matmul_backward(ctx, c == last ? dlnf : h.dlnf_part, chunks.rows_of(grad, c), TensorView{}, logits, h.lnf, w,
                         ops::WeightLayout::kOutIn);
    if (c != last) ops::residual_forward(ctx, dlnf, dlnf, h.dlnf_part);
    store.accumulate_grads(unit, grad);
    store.grads_ready(unit);  // the head's round: reduced now, not after the blocks
    store.release_params(unit, Pass::kBackward);
  }
}

void chunked_embedding_backward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, TensorView dresid,
                                TensorView tokens) {
  for (int c = 0; c < chunks.count(); ++c) {
    const int unit = chunks.unit(c);
    const TensorView grad = chunks.zeroed_grad(unit);
    const TensorView positions = c == 0 ? chunks.position_grad(grad) : TensorView{};
    ops::embedding_backward_rows(ctx, chunks.rows_of(grad, c), positions, dresid, tokens, c * chunks.columns(),
                                 chunks.padded_vocab());
    store.accumulate_grads(unit, grad);
    store.grads_ready(unit);
  }
}

}  // namespace zt
