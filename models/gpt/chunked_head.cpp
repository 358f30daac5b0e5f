// GptModel's LM head and token embedding in vocabulary chunks (train.head_chunks > 1): wte is split
// by rows across units, one per chunk (gpt_params.h). The loops over the chunks are every family's
// (models/vocab_chunk_passes.h); here GPT-2 says where its chunks are (VocabChunks) and which of its
// activations the head's loop uses.
#include "kernels/ops.h"
#include "models/gpt/gpt_model.h"
#include "models/vocab_chunk_passes.h"

namespace zt::gpt {

int GptModel::count() const { return dims_.head_chunk_count(); }
std::int64_t GptModel::columns() const { return dims_.Vc; }
std::int64_t GptModel::padded_vocab() const { return dims_.Vp; }
int GptModel::unit(int chunk) const { return wte_unit(config_, chunk); }

KernelParams& GptModel::kernel_params() { return params_; }

TensorView GptModel::rows_of(const TensorView& unit_view, int chunk) const {
  return wte_chunk_view(table_, config_, chunk, unit_view);
}

TensorView GptModel::head_grad(ParamStore& store, int unit) { return grad_destination(store, unit); }
TensorView GptModel::zeroed_grad(int unit) { return zeroed_grad_scratch(unit); }
TensorView GptModel::position_grad(const TensorView& unit0_grad) const {
  return embedding_views(table_, unit0_grad).wpe;  // wpe lives in chunk 0's unit
}

ChunkedHeadViews GptModel::chunked_head_views() const {
  const HeadActivations& h = *head_acts_;
  return {h.lnf, h.probs, h.row_max, h.row_sum, h.target_logit, h.losses, h.dlnf_part};
}

}  // namespace zt::gpt
