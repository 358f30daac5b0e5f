// A forward that no backward follows (evaluation, sampling) leaves every unit resharded at stage
// 3, for both families, while a training forward keeps the units its backward starts with: each
// model tells the store which it is (ForwardOptions::training: begin_pass is given the backward schedule).
// Until 2026-12 the Llama said "a backward follows" on every forward, so its evaluations and
// samples kept the head's units gathered, the tied table among them, until the next forward.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/app/config/run_config.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "models/model_family.h"

namespace zt {
namespace {

using nlohmann::json;

void check_family(const std::string& name, const json& model_section) {
  SCOPED_TRACE(name);
  const ModelSpec spec = parse_run_config({{"model", model_section}}, name).model_spec();
  const ParamTable table = spec.family().param_table(spec);
  MemoryTracker tracker;
  const ExecContext ctx{Device::kCPU, 1, nullptr};
  LocalCommunicator comm(tracker, {});
  ZeroOptions zero;
  zero.stage = 3;
  ZeroParamStore store(table, DType::kF32, zero, comm, tracker, ctx);
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    init_unit_params(spec, table, static_cast<int>(u), 7, store.working_shard(static_cast<int>(u)).as<float>());
  }
  const int T = 6;
  const std::vector<std::int32_t> tokens(T, 1), targets(T, 2);
  const auto gathered = [&] {
    int n = 0;
    for (std::size_t u = 0; u < table.units().size(); ++u) {
      n += store.unit_state(static_cast<int>(u)) != UnitState::kSharded ? 1 : 0;
    }
    return n;
  };
  ModelBuild build;
  build.seq_len = T;
  const std::unique_ptr<LanguageModel> model = make_model(spec, build, tracker, ctx);
  store.begin_step();
  model->forward(store, tokens.data(), targets.data(), {.training = true});
  EXPECT_GT(gathered(), 0) << "a training forward keeps the units its backward starts with";
  model->backward(store);
  model->forward(store, tokens.data(), targets.data(), {.training = false});
  EXPECT_EQ(gathered(), 0) << "an evaluation forward reshards everything";
  model->release_activations();
}

TEST(ForwardOnlyReshard, BothFamiliesReshardAfterAForwardWithoutBackward) {
  check_family("gpt2", {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 16}, {"block_size", 16}, {"vocab_size", 64}});
  check_family("llama", {{"arch", "llama"},
                         {"n_layer", 2},
                         {"n_head", 2},
                         {"n_kv_head", 1},
                         {"n_embd", 16},
                         {"block_size", 16},
                         {"vocab_size", 64},
                         {"tie_embeddings", true}});
}

}  // namespace
}  // namespace zt
