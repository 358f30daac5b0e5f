// ShardedAdamW: each parameter's overlap with this rank's shard, updated by the AdamW kernel.
#include "engine/distributed/optim/sharded_adamw.h"

#include <algorithm>

#include "engine/base/core/check.h"
#include "kernels/ops.h"

namespace zt {

std::vector<DecayRun> decay_runs(const ParamTable& table, int unit, const UnitShard& shard) {
  std::vector<const ParamSpec*> params;
  for (int index : table.units().at(static_cast<std::size_t>(unit)).params) params.push_back(&table.param(index));
  std::sort(params.begin(), params.end(), [](const ParamSpec* a, const ParamSpec* b) { return a->offset < b->offset; });
  std::vector<DecayRun> runs;
  for (const ParamSpec* p : params) {
    const std::int64_t lo = std::max(p->offset, shard.begin), hi = std::min(p->offset + p->numel, shard.end);
    if (lo >= hi) continue;  // this parameter lies outside the shard
    const std::int64_t at = lo - shard.begin;
    if (!runs.empty() && runs.back().decays == p->decays && runs.back().at + runs.back().n == at) {
      runs.back().n += hi - lo;
    } else {
      runs.push_back(DecayRun{at, hi - lo, p->decays});
    }
  }
  return runs;
}

ShardedAdamW::ShardedAdamW(ZeroParamStore& store, const AdamWHyper& hyper, MemoryTracker& tracker,
                           const ExecContext& ctx)
    : store_(store), hyper_(hyper), ctx_(ctx) {
  const ShardLayout& layout = store.optimizer_layout();
  for (std::size_t u = 0; u < layout.num_units(); ++u) {
    const std::int64_t n = layout.unit(static_cast<int>(u)).shard;
    m_.push_back(ops::allocate(ctx, tracker, MemCategory::kOptimizerStates, DType::kF32, n));
    v_.push_back(ops::allocate(ctx, tracker, MemCategory::kOptimizerStates, DType::kF32, n));
    if (store.param_dtype() == DType::kBF16) {
      master_.push_back(ops::allocate(ctx, tracker, MemCategory::kMasterWeights, DType::kF32, n));
    }
    runs_.push_back(decay_runs(store.table(), static_cast<int>(u), layout.unit(static_cast<int>(u))));
  }
}

TensorView ShardedAdamW::master(int unit) const {
  return master_.empty() ? store_.working_shard(unit) : master_.at(static_cast<std::size_t>(unit)).view();
}

Buffer ShardedAdamW::gather_master(int unit, MemoryTracker& tracker) {
  Buffer full(tracker, MemCategory::kWorkspace, DType::kF32, store_.optimizer_layout().unit(unit).padded);
  store_.gather_optimizer_shards(master(unit), full.view());
  return full;
}

void ShardedAdamW::load_unit(int unit, const float* full) {
  const UnitShard& s = store_.optimizer_layout().unit(unit);
  const TensorView host{const_cast<float*>(full) + s.begin, DType::kF32, Device::kCPU, Shape{s.live()}};
  if (!master_.empty()) ops::copy(ctx_, master_[static_cast<std::size_t>(unit)].view().slice(0, s.live()), host);
  // Working parameters of the optimizer's shard; at stages 1-2 the rest of the full unit arrives
  // with store.publish_updated_params(), which the caller runs once every unit is loaded.
  const TensorView working = store_.working_shard(unit).slice(0, s.live());
  if (working.device == Device::kCPU) {
    ops::cast(ctx_, working, host);
  } else if (!master_.empty()) {  // the master is already on the device: cast from it
    ops::cast(ctx_, working, master_[static_cast<std::size_t>(unit)].view().slice(0, s.live()));
  } else {
    ops::copy(ctx_, working, host);  // fp32 working parameters are the master
  }
}

void ShardedAdamW::restore_working_from_master() {
  for (std::size_t u = 0; !master_.empty() && u < master_.size(); ++u) {
    const int unit = static_cast<int>(u);
    const std::int64_t live = store_.optimizer_layout().unit(unit).live();
    ops::cast(ctx_, store_.working_shard(unit).slice(0, live), master_[u].view().slice(0, live));
  }
}

void ShardedAdamW::step(float lr, float grad_scale) {
  ++step_;
  AdamWHyper h = hyper_;
  h.lr = lr;
  const bool mixed = !master_.empty();
  // Every decay run of every unit in one call: one kernel launch per 48 runs on the GPU.
  std::vector<AdamWSlice> slices;
  for (std::size_t u = 0; u < runs_.size(); ++u) {
    const int unit = static_cast<int>(u);
    const TensorView params = master(unit), grads = store_.grad_shard(unit), working = store_.working_shard(unit);
    for (const DecayRun& r : runs_[u]) {
      slices.push_back(AdamWSlice{params.slice(r.at, r.n), grads.slice(r.at, r.n), m_[u].view().slice(r.at, r.n),
                                  v_[u].view().slice(r.at, r.n), mixed ? working.slice(r.at, r.n) : TensorView{},
                                  r.decays});
    }
  }
  ops::adamw_update_slices(ctx_, slices, h, step_, grad_scale);
}

}  // namespace zt
