// Through the real ZeroParamStore and ShardedAdamW (one rank, stage 0): save after k steps,
// restore into a fresh store and optimizer, and the following steps are bitwise those of the
// uninterrupted run (fp32, and bf16 with its master weights and re-cast working parameters).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "engine/app/checkpoint/optimizer_checkpoint.h"
#include "engine/base/core/bf16.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/optim/sharded_adamw.h"
#include "engine/distributed/sharding/zero_options.h"
#include "models/gpt/gpt_params.h"

namespace zt::ckpt {
namespace {

struct Replica {
  ZeroParamStore store;
  ShardedAdamW optimizer;
  Replica(const ParamTable& table, DType dtype, Communicator& comm, MemoryTracker& tracker, const ExecContext& ctx)
      : store(table, dtype, ZeroOptions{}, comm, tracker, ctx),
        optimizer(store, AdamWHyper{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f}, tracker, ctx) {}

  TensorView state(StateKind kind, int unit) const {
    switch (kind) {
      case StateKind::kMaster: return optimizer.master(unit);
      case StateKind::kExpAvg: return optimizer.exp_avg(unit);
      case StateKind::kExpAvgSq: return optimizer.exp_avg_sq(unit);
    }
    return {};
  }
  // One step on a deterministic synthetic gradient of step `step`.
  void step(int step) {
    for (std::size_t u = 0; u < store.table().units().size(); ++u) {
      const TensorView g = store.grad_shard(static_cast<int>(u));
      for (std::int64_t i = 0; i < g.numel(); ++i) {
        const float value = std::sin(0.37f * static_cast<float>(i + 1) + static_cast<float>(step + 7 * u)) * 0.5f;
        if (g.dtype == DType::kF32) {
          g.as<float>()[i] = value;
        } else {
          g.as<bf16>()[i] = float_to_bf16(value);
        }
      }
    }
    optimizer.step(1e-2f);
  }
};

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.size_bytes() == b.size_bytes() && std::memcmp(a.data, b.data, a.size_bytes()) == 0;
}

class OptimizerRestore : public ::testing::TestWithParam<DType> {};

TEST_P(OptimizerRestore, ResumedStepsAreBitwiseTheUninterruptedOnes) {
  const DType dtype = GetParam();
  gpt::GptConfig config;
  config.n_layer = 2;
  config.n_embd = 16;
  config.block_size = 8;
  config.vocab_size = 70;
  const ParamTable table = gpt::build_param_table(config);
  MemoryTracker tracker;
  LocalCommunicator comm(tracker, {});
  const ExecContext ctx{Device::kCPU, 1, nullptr};
  std::string tmpl = (std::filesystem::temp_directory_path() / "zt_ckpt_restore_XXXXXX").string();
  const std::string folder = mkdtemp(tmpl.data());

  Replica a(table, dtype, comm, tracker, ctx);
  std::vector<float> full(static_cast<std::size_t>(table.max_unit_numel()));
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    gpt::init_unit_params(table, config, static_cast<int>(u), 1234, full.data());
    a.optimizer.load_unit(static_cast<int>(u), full.data());
  }
  a.store.publish_updated_params();
  for (int s = 0; s < 3; ++s) a.step(s);

  CheckpointMeta meta;
  meta.position.step = 3;
  const SaveResult saved = save_training_state(comm, folder, a.store, a.optimizer, meta, 0);

  Replica b(table, dtype, comm, tracker, ctx);
  const CheckpointReader reader(saved.path);
  EXPECT_EQ(reader.manifest().position.optimizer_step, 3);
  EXPECT_EQ(reader.manifest().param_dtype, dtype == DType::kF32 ? "f32" : "bf16");
  restore_training_state(reader, b.store, b.optimizer);
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    EXPECT_TRUE(same_bytes(a.store.working_shard(static_cast<int>(u)), b.store.working_shard(static_cast<int>(u))))
        << "working parameters of unit " << u << " right after the restore";
  }
  for (int s = 3; s < 5; ++s) {
    a.step(s);
    b.step(s);
  }
  for (std::size_t u = 0; u < table.units().size(); ++u) {
    const int unit = static_cast<int>(u);
    EXPECT_TRUE(same_bytes(a.store.working_shard(unit), b.store.working_shard(unit))) << "working, unit " << u;
    for (StateKind k : {StateKind::kMaster, StateKind::kExpAvg, StateKind::kExpAvgSq}) {
      EXPECT_TRUE(same_bytes(a.state(k, unit), b.state(k, unit))) << state_kind_name(k) << ", unit " << u;
    }
  }
  std::filesystem::remove_all(folder);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, OptimizerRestore, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return info.param == DType::kF32 ? "f32" : "bf16"; });

}  // namespace
}  // namespace zt::ckpt
