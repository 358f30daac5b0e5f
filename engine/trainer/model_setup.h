// Setting a GPT model's parameters up for a run: every rank draws each full unit from the seed (the
// same values whatever the rank count), keeps its shard as fp32 master and working parameters,
// and the store publishes the full units where its stage keeps them.
#pragma once

#include <cstdint>

#include "engine/optim/sharded_adamw.h"
#include "models/gpt/gpt_config.h"

namespace zt {

void initialize_gpt_parameters(const gpt::GptConfig& config, std::uint64_t seed, ZeroParamStore& store,
                               ShardedAdamW& optimizer, MemoryTracker& tracker);

}  // namespace zt
