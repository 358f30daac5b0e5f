// Gathering, checking and writing the final weights (see the header).
#include "engine/trainer/final_weights.h"

#include <cmath>
#include <vector>

#include "engine/core/buffer.h"
#include "engine/core/check.h"
#include "engine/io/model_weights.h"
#include "kernels/ops.h"

namespace zt {

void write_final_weights(const std::string& path, const ZeroParamStore& store, const ShardedAdamW& optimizer,
                         Communicator& store_comm, MemoryTracker& tracker, const ExecContext& ctx, bool root,
                         const std::map<std::string, std::string>& metadata) {
  const ParamTable& table = store.table();
  std::vector<Buffer> full;
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    const UnitShard& sh = store.optimizer_layout().unit(static_cast<int>(u));
    full.emplace_back(tracker, MemCategory::kWorkspace, DType::kF32, sh.padded);
    if (store.optimizer_layout().world_size() == 1) {  // stage 0: every rank holds the whole master
      ops::copy(ctx, full.back().view(), optimizer.master(static_cast<int>(u)));
    } else {
      store_comm.all_gather(optimizer.master(static_cast<int>(u)), full.back().view()).wait();
    }
    const float* p = full.back().as<float>();
    for (std::int64_t i = 0; i < sh.numel; ++i) {
      if (!std::isfinite(p[i])) throw_runtime_error("parameters became non-finite; final weights not written");
    }
  }
  if (!root) return;
  save_model_weights(path, table,
                     [&](int u) {
                       return full[static_cast<std::size_t>(u)].view().slice(
                           0, table.units()[static_cast<std::size_t>(u)].numel);
                     },
                     metadata);
}

}  // namespace zt
