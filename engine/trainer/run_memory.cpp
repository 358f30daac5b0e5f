// A run config's memory prediction (see the header).
#include "engine/trainer/run_memory.h"

#include "models/gpt/gpt_footprint.h"
#include "models/gpt/gpt_params.h"

namespace zt {

StageMemory predict_run_memory(const RunConfig& config, int stage, int world_size, const ShardingOptions& options) {
  const ModelFootprint footprint = gpt::predict_footprint(
      config.model, config.train.micro_batch, config.train.seq_len, config.train.activation_checkpointing,
      config.param_dtype, config.device, config.activation_dtype, config.train.unit_layout());
  ShardingOptions o = options;
  o.deterministic = o.deterministic || config.train.deterministic;
  o.backend = store_collective_backend(config.device, world_size);
  ZeroOptions zero = config.zero;
  zero.stage = stage;
  return predict_rank_memory(
      gpt::build_param_table(config.model, config.train.unit_layout()), config.param_dtype, footprint,
      gpt::step_schedule(config.model, config.train.unit_layout(), config.train.activation_checkpointing), zero,
      world_size, o);
}

}  // namespace zt
