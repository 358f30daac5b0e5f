// Parameter initialisation into the optimizer's shard and the store.
#include "engine/app/trainer/model_setup.h"

namespace zt {

void initialize_parameters(const ModelSpec& spec, std::uint64_t seed, ZeroParamStore& store, ShardedAdamW& optimizer,
                           MemoryTracker& tracker) {
  const ParamTable& table = store.table();
  Buffer full(tracker, MemCategory::kWorkspace, DType::kF32, table.max_unit_numel(), Device::kCPU, false);
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    init_unit_params(spec, table, static_cast<int>(u), seed, full.as<float>());
    optimizer.load_unit(static_cast<int>(u), full.as<float>());
  }
  store.publish_updated_params();
}

}  // namespace zt
