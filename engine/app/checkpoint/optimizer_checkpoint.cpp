// ShardedAdamW's buffers as checkpoint sources and targets. Files are read and written from host
// memory: state on a device passes through host staging (one unit's state at a time when saving;
// this rank's own shard when loading, since the reader plans every read before it executes).
#include "engine/app/checkpoint/optimizer_checkpoint.h"

#include <vector>

#include "kernels/ops.h"

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

TensorView host_view(std::vector<float>& storage, const TensorView& like) {
  storage.resize(static_cast<std::size_t>(like.numel()));
  return TensorView{storage.data(), DType::kF32, Device::kCPU, like.shape};
}

void fill_state_meta(CheckpointMeta& meta, const ZeroParamStore& store, const ShardedAdamW& optimizer) {
  meta.position.optimizer_step = optimizer.step_count();
  meta.zero_stage = store.stage();
  meta.param_dtype = store.param_dtype() == DType::kBF16 ? "bf16" : "f32";
}

}  // namespace

SaveResult save_training_state(Communicator& comm, const std::string& folder, const ZeroParamStore& store,
                               const ShardedAdamW& optimizer, CheckpointMeta meta, int keep_last) {
  fill_state_meta(meta, store, optimizer);
  std::vector<float> staging;  // the writer uses each view before it asks for the next
  const OptimizerStateSource source{&store.optimizer_layout(), [&](StateKind k, int u) {
                                      return ops::on_host(optimizer.context(), state_of(optimizer, k, u), staging);
                                    }};
  return save_checkpoint(comm, folder, store.table(), source, meta, keep_last);
}

double start_training_state_save(AsyncCheckpointer& saver, const std::string& folder, const ZeroParamStore& store,
                                 const ShardedAdamW& optimizer, CheckpointMeta meta, int keep_last) {
  fill_state_meta(meta, store, optimizer);
  const OptimizerStateSource source{&store.optimizer_layout(),
                                    [&](StateKind k, int u) { return state_of(optimizer, k, u); }};
  const ExecContext& ctx = optimizer.context();
  return saver.start(
      folder, store.table(), source, [&](TensorView dst, TensorView src) { ops::copy(ctx, dst, src); }, meta,
      keep_last);
}

void load_training_state(const CheckpointReader& reader, ZeroParamStore& store, ShardedAdamW& optimizer) {
  const std::size_t units = store.optimizer_layout().num_units();
  const bool on_device = units > 0 && optimizer.exp_avg(0).device != Device::kCPU;
  std::vector<std::vector<float>> staging(on_device ? units * kNumStateKinds : 0);
  auto target = [&](StateKind k, int u) {
    const TensorView state = state_of(optimizer, k, u);
    if (!on_device) return state;
    return host_view(staging[static_cast<std::size_t>(u) * kNumStateKinds + static_cast<std::size_t>(k)], state);
  };
  load_optimizer_state(reader, store.table(), {&store.optimizer_layout(), target});
  for (std::size_t u = 0; on_device && u < units; ++u) {
    for (int k = 0; k < kNumStateKinds; ++k) {
      const auto kind = static_cast<StateKind>(k);
      const int unit = static_cast<int>(u);
      ops::copy(optimizer.context(), state_of(optimizer, kind, unit), target(kind, unit));
    }
  }
  optimizer.set_step_count(reader.manifest().position.optimizer_step);
  optimizer.restore_working_from_master();
}

void restore_training_state(const CheckpointReader& reader, ZeroParamStore& store, ShardedAdamW& optimizer) {
  load_training_state(reader, store, optimizer);
  store.publish_updated_params();
}

}  // namespace zt::ckpt
