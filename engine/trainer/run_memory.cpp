// A run config's memory prediction (see the header).
#include "engine/trainer/run_memory.h"

#include "models/model_family.h"

namespace zt {

StageMemory predict_run_memory(const RunConfig& config, int stage, int world_size, const ShardingOptions& options) {
  const ModelSpec spec = config.model_spec();
  const ModelFootprint footprint = predict_footprint(spec, config.model_build(), config.param_dtype, config.device);
  ShardingOptions o = options;
  o.deterministic = o.deterministic || config.train.deterministic;
  o.backend = store_collective_backend(config.device, world_size);
  ZeroOptions zero = config.zero;
  zero.stage = stage;
  return predict_rank_memory(build_param_table(spec), config.param_dtype, footprint,
                             step_schedule(spec, config.train.activation_checkpointing), zero, world_size, o);
}

}  // namespace zt
