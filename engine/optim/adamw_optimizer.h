// AdamW over every unit of a ResidentParamStore (single rank, unsharded). It owns the fp32
// master weights (bf16 mode only: in fp32 mode the working parameters are the master) and the
// moments m, v, and applies weight decay only where the parameter table says a tensor decays.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/buffer.h"
#include "engine/sharding/resident_param_store.h"
#include "kernels/cpu/adamw.h"

namespace zt {

class AdamWOptimizer {
 public:
  // In bf16 mode allocates a zeroed fp32 master: fill it through master(unit), then call
  // copy_master_to_working(). In fp32 mode the master is the store's parameters themselves.
  AdamWOptimizer(ResidentParamStore& store, const cpu::AdamWHyper& hyper, MemoryTracker& tracker,
                 const ExecContext& ctx);

  // One update from the store's gradients (times grad_scale), then the working parameters are
  // re-cast from the master. step_count() goes up by one.
  void step(float lr, float grad_scale = 1.0f);
  int step_count() const { return step_; }
  // The fp32 master of a unit (the store's own buffer in fp32 mode), writable for initialisation.
  TensorView master(int unit) const;
  // Working parameters = master cast to the working dtype (no-op in fp32 mode).
  void copy_master_to_working();
  // Sum of squares of every stored gradient (fp64), for the global gradient norm.
  double grad_sum_of_squares() const;

 private:
  ResidentParamStore& store_;
  cpu::AdamWHyper hyper_;
  ExecContext ctx_;
  std::vector<Buffer> master_;  // empty in fp32 mode
  std::vector<Buffer> m_, v_;
  int step_ = 0;
};

}  // namespace zt
