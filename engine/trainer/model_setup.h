// Setting a GPT model's parameters up for a run: initialisation from the seed straight into the
// optimizer's fp32 master (no untracked copy), then the working parameters cast from it.
#pragma once

#include <cstdint>

#include "engine/optim/adamw_optimizer.h"
#include "models/gpt/gpt_config.h"

namespace zt {

void initialize_gpt_parameters(const ParamTable& table, const gpt::GptConfig& config, std::uint64_t seed,
                               AdamWOptimizer& optimizer);

}  // namespace zt
