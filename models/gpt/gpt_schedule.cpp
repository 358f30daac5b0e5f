// GptModel's pass schedules (kept beside the model; a test records the model's real calls
// against them).
#include "models/gpt/gpt_schedule.h"

#include <initializer_list>

#include "models/block_schedule.h"
#include "models/gpt/gpt_params.h"

namespace zt::gpt {

namespace {

void add(PassSchedule& s, std::initializer_list<UnitEvent> events) {
  for (const UnitEvent& e : events) s.push_back(e);  // (vector::insert trips a GCC 12 false warning)
}

}  // namespace

std::vector<BlockUnitIds> block_unit_ids(const GptConfig& config, const UnitLayout& layout) {
  std::vector<BlockUnitIds> ids;
  for (int l = 0; l < config.n_layer; ++l) {
    ids.push_back({block_unit(l), layout.block_units == 2 ? mlp_unit(config, layout, l) : -1});
  }
  return ids;
}

PassSchedule forward_schedule(const GptConfig& config, const UnitLayout& layout) {
  const int emb = embedding_unit(), fin = final_unit(config), chunks = head_chunk_count(config, layout.head_chunks);
  PassSchedule s;
  add(s, {{UnitOp::kAcquire, emb}});
  for (int c = 1; c < chunks; ++c) {
    add(s, {{UnitOp::kAcquire, wte_unit(config, c)}, {UnitOp::kRelease, wte_unit(config, c)}});
  }
  add(s, {{UnitOp::kRelease, emb}});
  for (const BlockUnitIds& block : block_unit_ids(config, layout)) add_block_forward(s, block);
  add(s, {{UnitOp::kAcquire, fin}});
  for (int c = 0; c < chunks; ++c) {
    add(s, {{UnitOp::kAcquire, wte_unit(config, c)}, {UnitOp::kRelease, wte_unit(config, c)}});
  }
  add(s, {{UnitOp::kRelease, fin}});
  return s;
}

PassSchedule backward_schedule(const GptConfig& config, const UnitLayout& layout, const CheckpointPolicy& policy) {
  const int emb = embedding_unit(), fin = final_unit(config), chunks = head_chunk_count(config, layout.head_chunks);
  PassSchedule s;
  if (chunks == 1) {
    add(s, {{UnitOp::kAcquire, emb}, {UnitOp::kAccumulate, emb}, {UnitOp::kRelease, emb}});
  } else {
    for (int c = chunks - 1; c >= 0; --c) {
      const int u = wte_unit(config, c);
      add(s, {{UnitOp::kAcquire, u}, {UnitOp::kAccumulate, u}, {UnitOp::kGradsReady, u}, {UnitOp::kRelease, u}});
    }
  }
  add(s, {{UnitOp::kAcquire, fin}, {UnitOp::kAccumulate, fin}, {UnitOp::kGradsReady, fin}, {UnitOp::kRelease, fin}});
  const std::vector<BlockUnitIds> blocks = block_unit_ids(config, layout);
  for (int l = config.n_layer - 1; l >= 0; --l) {
    add_block_backward(s, blocks[static_cast<std::size_t>(l)], policy.is_checkpointed(l));
  }
  for (int c = 0; c < chunks; ++c) {
    add(s, {{UnitOp::kAccumulate, wte_unit(config, c)}, {UnitOp::kGradsReady, wte_unit(config, c)}});
  }
  return s;
}

}  // namespace zt::gpt
