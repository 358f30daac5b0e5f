// What the trainer tests that build their own models start from: a config's model on one rank,
// every unit resident in a stage-0 fp32 store initialised from `seed` (init_unit_params).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "engine/app/config/run_config.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "models/model_family.h"

namespace zt::testing {

struct ResidentModel {
  ModelSpec spec;
  ParamTable table;
  MemoryTracker tracker;
  ExecContext ctx{Device::kCPU, 2, nullptr};
  LocalCommunicator comm{tracker, {}};
  ZeroParamStore store;

  // `config`: a run config's JSON (its model section at least); `name` names it in errors.
  ResidentModel(const nlohmann::json& config, const std::string& name, std::uint64_t seed)
      : spec(parse_run_config(config, name).model_spec()),
        table(spec.family().param_table(spec)),
        store(table, DType::kF32, ZeroOptions{}, comm, tracker, ctx) {
    for (std::size_t u = 0; u < table.units().size(); ++u)
      init_unit_params(spec, table, static_cast<int>(u), seed, store.working_shard(static_cast<int>(u)).as<float>());
  }
  std::unique_ptr<LanguageModel> build(const ModelBuild& b) { return make_model(spec, b, tracker, ctx); }
};

}  // namespace zt::testing
