// The Llama decoder's pass schedules (declared in llama_model.h; the store enforces them).
#include <initializer_list>

#include "models/block_schedule.h"
#include "models/head_chunks.h"
#include "models/llama/llama_model.h"

namespace zt::llama {

namespace {

void add(PassSchedule& s, std::initializer_list<UnitEvent> events) {
  for (const UnitEvent& e : events) s.push_back(e);
}

}  // namespace

std::vector<BlockUnitIds> layer_unit_ids(const LlamaConfig& c, const UnitLayout& layout) {
  std::vector<BlockUnitIds> ids;
  for (int l = 0; l < c.n_layer; ++l)
    ids.push_back({layer_unit(l), layout.block_units == 2 ? mlp_unit(c, layout, l) : -1});
  return ids;
}

PassSchedule forward_schedule(const LlamaConfig& c, const UnitLayout& layout) {
  const int emb = embedding_unit(), fin = final_unit(c);
  const int chunks = head_chunk_count(c.padded_vocab_size(), layout.head_chunks);
  PassSchedule s{{UnitOp::kAcquire, emb}};
  for (int k = 1; c.tie_embeddings && k < chunks; ++k) {  // the embedding reads every chunk of its table
    add(s, {{UnitOp::kAcquire, head_chunk_unit(c, k)}, {UnitOp::kRelease, head_chunk_unit(c, k)}});
  }
  add(s, {{UnitOp::kRelease, emb}});
  for (const BlockUnitIds& layer : layer_unit_ids(c, layout)) add_block_forward(s, layer);
  add(s, {{UnitOp::kAcquire, fin}});
  if (chunks > 1) {
    for (int k = 0; k < chunks; ++k) {
      add(s, {{UnitOp::kAcquire, head_chunk_unit(c, k)}, {UnitOp::kRelease, head_chunk_unit(c, k)}});
    }
  } else if (c.tie_embeddings) {
    add(s, {{UnitOp::kAcquire, emb}, {UnitOp::kRelease, emb}});
  }
  add(s, {{UnitOp::kRelease, fin}});
  return s;
}

PassSchedule backward_schedule(const LlamaConfig& c, const UnitLayout& layout, const CheckpointPolicy& policy) {
  const int emb = embedding_unit(), fin = final_unit(c);
  const int chunks = head_chunk_count(c.padded_vocab_size(), layout.head_chunks);
  PassSchedule s;
  if (chunks > 1) {  // each chunk of the head's table reduced as soon as the head is done with it
    for (int k = chunks - 1; k >= 0; --k) {
      const int u = head_chunk_unit(c, k);
      add(s, {{UnitOp::kAcquire, u}, {UnitOp::kAccumulate, u}, {UnitOp::kGradsReady, u}, {UnitOp::kRelease, u}});
    }
  } else if (c.tie_embeddings) {  // the head's contribution to the tied table first
    add(s, {{UnitOp::kAcquire, emb}, {UnitOp::kAccumulate, emb}, {UnitOp::kRelease, emb}});
  }
  add(s, {{UnitOp::kAcquire, fin}, {UnitOp::kAccumulate, fin}, {UnitOp::kGradsReady, fin}, {UnitOp::kRelease, fin}});
  const std::vector<BlockUnitIds> layers = layer_unit_ids(c, layout);
  for (int l = c.n_layer - 1; l >= 0; --l) {
    add_block_backward(s, layers[static_cast<std::size_t>(l)], policy.is_checkpointed(l));
  }
  // The embedding's scatter-add (reading no weights): a tied table's second round, chunk by chunk.
  for (int k = 0; k < (c.tie_embeddings ? chunks : 1); ++k) {
    const int u = c.tie_embeddings && chunks > 1 ? head_chunk_unit(c, k) : emb;
    add(s, {{UnitOp::kAccumulate, u}, {UnitOp::kGradsReady, u}});
  }
  return s;
}

}  // namespace zt::llama
