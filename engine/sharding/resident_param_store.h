// The single-rank ParamStore (ZeRO stage 0 on one rank): every unit's working parameters and
// gradients are resident for the whole run, charged to the parameters / gradients categories.
#pragma once

#include <vector>

#include "engine/core/buffer.h"
#include "engine/sharding/param_store.h"
#include "kernels/exec_context.h"

namespace zt {

class ResidentParamStore final : public ParamStore {
 public:
  ResidentParamStore(const ParamTable& table, DType param_dtype, MemoryTracker& tracker, const ExecContext& ctx);

  const ParamTable& table() const override { return table_; }
  DType param_dtype() const override { return param_dtype_; }
  TensorView acquire_params(int unit, Pass pass) override;
  void release_params(int unit, Pass pass) override;
  void accumulate_grads(int unit, TensorView grad_f32) override;
  void grads_ready(int unit) override;

  // Direct access for the optimizer, initialisation and debug dumps.
  TensorView params(int unit) const { return params_.at(static_cast<std::size_t>(unit)).view(); }
  TensorView grads(int unit) const { return grads_.at(static_cast<std::size_t>(unit)).view(); }
  void zero_grads();

 private:
  const ParamTable& table_;
  DType param_dtype_;
  ExecContext ctx_;
  std::vector<Buffer> params_;
  std::vector<Buffer> grads_;
  std::vector<bool> acquired_;  // per unit: between acquire and release (catches unbalanced calls)
};

}  // namespace zt
