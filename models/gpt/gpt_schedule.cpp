// GptModel's pass schedules (kept beside the model; a test records the model's real calls
// against them).
#include "models/gpt/gpt_schedule.h"

#include <initializer_list>

#include "models/gpt/gpt_params.h"

namespace zt::gpt {

namespace {

void add(PassSchedule& s, std::initializer_list<UnitEvent> events) {
  for (const UnitEvent& e : events) s.push_back(e);  // (vector::insert trips a GCC 12 false warning)
}

}  // namespace

PassSchedule forward_schedule(const GptConfig& config) {
  const int emb = embedding_unit(), fin = final_unit(config);
  PassSchedule s;
  add(s, {{UnitOp::kAcquire, emb}, {UnitOp::kRelease, emb}});
  for (int l = 0; l < config.n_layer; ++l)
    add(s, {{UnitOp::kAcquire, block_unit(l)}, {UnitOp::kRelease, block_unit(l)}});
  add(s, {{UnitOp::kAcquire, fin}, {UnitOp::kAcquire, emb}, {UnitOp::kRelease, emb}, {UnitOp::kRelease, fin}});
  return s;
}

PassSchedule backward_schedule(const GptConfig& config, bool head_chunked) {
  const int emb = embedding_unit(), fin = final_unit(config);
  PassSchedule s;
  add(s, {{UnitOp::kAcquire, emb}, {UnitOp::kAccumulate, emb}});
  if (head_chunked) add(s, {{UnitOp::kGradsReady, emb}});
  add(s, {{UnitOp::kRelease, emb},
          {UnitOp::kAcquire, fin},
          {UnitOp::kAccumulate, fin},
          {UnitOp::kGradsReady, fin},
          {UnitOp::kRelease, fin}});
  for (int l = config.n_layer - 1; l >= 0; --l) {
    const int u = block_unit(l);
    add(s, {{UnitOp::kAcquire, u}, {UnitOp::kAccumulate, u}, {UnitOp::kGradsReady, u}, {UnitOp::kRelease, u}});
  }
  add(s, {{UnitOp::kAccumulate, emb}, {UnitOp::kGradsReady, emb}});
  return s;
}

}  // namespace zt::gpt
