// AdamWOptimizer: per-parameter ranges of each unit, decayed or not, updated by the AdamW kernel.
#include "engine/optim/adamw_optimizer.h"

#include <cstring>

#include "kernels/cpu/cast.h"
#include "kernels/cpu/norm.h"

namespace zt {

namespace {

TensorView slice(const TensorView& flat, std::int64_t offset, std::int64_t n) {
  return TensorView{static_cast<char*>(flat.data) + offset * static_cast<std::int64_t>(dtype_size_bytes(flat.dtype)),
                    flat.dtype, flat.device, Shape{n}};
}

}  // namespace

AdamWOptimizer::AdamWOptimizer(ResidentParamStore& store, const cpu::AdamWHyper& hyper, MemoryTracker& tracker,
                               const ExecContext& ctx)
    : store_(store), hyper_(hyper), ctx_(ctx) {
  const auto& units = store.table().units();
  for (std::size_t u = 0; u < units.size(); ++u) {
    m_.emplace_back(tracker, MemCategory::kOptimizerStates, DType::kF32, units[u].numel);
    v_.emplace_back(tracker, MemCategory::kOptimizerStates, DType::kF32, units[u].numel);
    if (store.param_dtype() == DType::kBF16) {
      master_.emplace_back(tracker, MemCategory::kMasterWeights, DType::kF32, units[u].numel);
    }
  }
}

void AdamWOptimizer::copy_master_to_working() {
  for (std::size_t u = 0; u < master_.size(); ++u) {
    cpu::cast(ctx_, store_.params(static_cast<int>(u)), master_[u].view());
  }
}

double AdamWOptimizer::grad_sum_of_squares() const {
  double sum = 0.0;  // units in a fixed order: the norm is reproducible
  for (std::size_t u = 0; u < store_.table().units().size(); ++u) {
    sum += cpu::sum_of_squares(ctx_, store_.grads(static_cast<int>(u)));
  }
  return sum;
}

TensorView AdamWOptimizer::master(int unit) const {
  return master_.empty() ? store_.params(unit) : master_.at(static_cast<std::size_t>(unit)).view();
}

void AdamWOptimizer::step(float lr, float grad_scale) {
  ++step_;
  cpu::AdamWHyper h = hyper_;
  h.lr = lr;
  const ParamTable& table = store_.table();
  const bool mixed = !master_.empty();
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    const int unit = static_cast<int>(u);
    const TensorView params = master(unit), grads = store_.grads(unit), working = store_.params(unit);
    const TensorView m = m_[u].view(), v = v_[u].view();
    for (int index : table.units()[u].params) {
      const ParamSpec& p = table.param(index);
      h.weight_decay = p.decays ? hyper_.weight_decay : 0.0f;
      cpu::adamw_update(ctx_, slice(params, p.offset, p.numel), slice(grads, p.offset, p.numel),
                        slice(m, p.offset, p.numel), slice(v, p.offset, p.numel),
                        mixed ? slice(working, p.offset, p.numel) : TensorView{}, h, step_, grad_scale);
    }
  }
}

}  // namespace zt
