// ShardedAdamW's buffers as checkpoint sources and targets.
#include "engine/checkpoint/optimizer_checkpoint.h"

namespace zt::ckpt {

namespace {

TensorView state_of(const ShardedAdamW& optimizer, StateKind kind, int unit) {
  switch (kind) {
    case StateKind::kMaster: return optimizer.master(unit);
    case StateKind::kExpAvg: return optimizer.exp_avg(unit);
    case StateKind::kExpAvgSq: return optimizer.exp_avg_sq(unit);
  }
  return {};
}

}  // namespace

SaveResult save_training_state(Communicator& comm, const std::string& folder, const ZeroParamStore& store,
                               const ShardedAdamW& optimizer, CheckpointMeta meta, int keep_last) {
  meta.position.optimizer_step = optimizer.step_count();
  meta.zero_stage = store.stage();
  meta.param_dtype = store.param_dtype() == DType::kBF16 ? "bf16" : "f32";
  const OptimizerStateSource source{&store.optimizer_layout(),
                                    [&](StateKind k, int u) { return state_of(optimizer, k, u); }};
  return save_checkpoint(comm, folder, store.table(), source, meta, keep_last);
}

void restore_training_state(const CheckpointReader& reader, ZeroParamStore& store, ShardedAdamW& optimizer) {
  load_optimizer_state(reader, store.table(),
                       {&store.optimizer_layout(), [&](StateKind k, int u) { return state_of(optimizer, k, u); }});
  optimizer.set_step_count(reader.manifest().position.optimizer_step);
  optimizer.restore_working_from_master();
}

}  // namespace zt::ckpt
