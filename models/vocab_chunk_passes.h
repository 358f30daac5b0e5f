// The token table and LM head in vocabulary chunks (train.head_chunks > 1), for every family: the
// store calls and kernels of each pass's loop over the chunks, written once (GPT-2's tied wte and a
// Llama's head or tied table alike). Each chunk's rows are a unit of their own, acquired one at a
// time, so ZeRO gathers, frees and reduces the table a chunk at a time and the logits are never
// held whole (docs/memory.md, "The head in vocabulary chunks"). A family says where its chunks
// are (VocabChunks); the loops say when they are used.
#pragma once

#include <cstdint>

#include "engine/base/core/tensor.h"
#include "engine/distributed/sharding/param_store.h"
#include "kernels/exec_context.h"
#include "models/kernel_params.h"

namespace zt {

// A family's chunked table, as the loops need it.
class VocabChunks {
 public:
  virtual int count() const = 0;
  virtual std::int64_t columns() const = 0;       // Vc: rows per chunk (the last may hold fewer)
  virtual std::int64_t padded_vocab() const = 0;  // Vp
  virtual int unit(int chunk) const = 0;
  // The family's working parameters: the chunks take turns in fp32-copy slot 1 (slot 0 holds what
  // stays in use across the loop).
  virtual KernelParams& kernel_params() = 0;
  // The chunk's rows [rows, C] inside its unit's parameters or gradient.
  virtual TensorView rows_of(const TensorView& unit_view, int chunk) const = 0;
  // Where the head's contribution to the chunk's unit gradient is added (a zeroed fp32 scratch, or
  // the store's own storage where it lends it), and the zeroed fp32 scratch of the embedding's
  // second round.
  virtual TensorView head_grad(ParamStore& store, int unit) = 0;
  virtual TensorView zeroed_grad(int unit) = 0;
  // The position table's gradient inside chunk 0's unit gradient (GPT-2's wpe), or empty.
  virtual TensorView position_grad(const TensorView& /*unit0_grad*/) const { return {}; }

 protected:
  ~VocabChunks() = default;
};

// The head's activations the loops use: the final norm's output lnf [B, T, C]; a buffer for one
// chunk's logits [BT, Vc] (its data and device: each chunk views its width); the online softmax's
// row statistics [BT] (row_max becomes the log-sum-exp) and losses [BT]; one chunk's part of dlnf.
struct ChunkedHeadViews {
  TensorView lnf, logits, row_max, row_sum, target_logit, losses, dlnf_part;
};

// out = the embedding of `tokens`, chunk 0's rows (`first`, already acquired by the caller with the
// position table `positions`, which may be empty) then each later chunk's in turn.
void chunked_embedding_forward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, TensorView out,
                               TensorView tokens, TensorView first, TensorView positions);
// The logits chunk by chunk (each copied to logits_out when set), the online softmax's statistics
// over them and the losses.
void chunked_head_forward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, const ChunkedHeadViews& h,
                          TensorView targets, int vocab_size, float* logits_out);
// The last chunk first (the forward's last unit, still gathered): each chunk's logits again, its
// dlogits (dloss per row), its rows' gradient reduced at once (the head's round), and
// dlnf = the sum over chunks of dlogits_k @ W_k (the last chunk writes it, each earlier one adds).
void chunked_head_backward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, const ChunkedHeadViews& h,
                           TensorView dlnf, TensorView targets, int vocab_size, float dloss);
// The embedding's gradient, a scatter-add of dresid into each chunk's rows (its unit's second
// round, through the fp32 scratch); the position table's with chunk 0.
void chunked_embedding_backward(const ExecContext& ctx, ParamStore& store, VocabChunks& chunks, TensorView dresid,
                                TensorView tokens);

}  // namespace zt
