// ResidentParamStore: full per-unit buffers; accumulation rounds into bf16 when grads are bf16.
#include "engine/sharding/resident_param_store.h"

#include <cstring>

#include "kernels/cpu/residual.h"

namespace zt {

ResidentParamStore::ResidentParamStore(const ParamTable& table, DType param_dtype, MemoryTracker& tracker,
                                       const ExecContext& ctx)
    : table_(table), param_dtype_(param_dtype), ctx_(ctx) {
  ZT_CHECK(param_dtype == DType::kF32 || param_dtype == DType::kBF16);
  for (const UnitSpec& u : table.units()) {
    params_.emplace_back(tracker, MemCategory::kParameters, param_dtype, u.numel);
    grads_.emplace_back(tracker, MemCategory::kGradients, param_dtype, u.numel);
  }
  acquired_.assign(table.units().size(), false);
}

TensorView ResidentParamStore::acquire_params(int unit, Pass) {
  acquired_.at(static_cast<std::size_t>(unit)) = true;
  return params(unit);
}

void ResidentParamStore::release_params(int unit, Pass) {
  ZT_CHECK(acquired_.at(static_cast<std::size_t>(unit)), "release of unit {} that was not acquired", unit);
  acquired_[static_cast<std::size_t>(unit)] = false;
}

void ResidentParamStore::accumulate_grads(int unit, TensorView grad_f32) {
  cpu::accumulate_into(ctx_, grads(unit), grad_f32);
}

void ResidentParamStore::grads_ready(int) {}

void ResidentParamStore::zero_grads() {
  for (Buffer& g : grads_) std::memset(g.data(), 0, static_cast<std::size_t>(g.size_bytes()));
}

}  // namespace zt
