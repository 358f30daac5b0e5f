// GPT parameter initialisation into the optimizer's master weights.
#include "engine/trainer/model_setup.h"

#include "models/gpt/gpt_params.h"

namespace zt {

void initialize_gpt_parameters(const ParamTable& table, const gpt::GptConfig& config, std::uint64_t seed,
                               AdamWOptimizer& optimizer) {
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    gpt::init_unit_params(table, config, static_cast<int>(u), seed, optimizer.master(static_cast<int>(u)).as<float>());
  }
  optimizer.copy_master_to_working();
}

}  // namespace zt
