// StagePolicy against docs/zero_memory.md's table, worked by hand: a unit of 10 elements on 3
// ranks (shards of 4, padded to 12, rank 2 holding 2 elements and 2 of padding).
#include <gtest/gtest.h>

#include "engine/distributed/sharding/stage_policy.h"

namespace zt {
namespace {

ZeroOptions at_stage(int stage) {
  ZeroOptions z;
  z.stage = stage;
  return z;
}

void expect_buffer(const UnitBuffer& b, std::int64_t numel, std::int64_t padding, const char* what) {
  EXPECT_EQ(b.numel, numel) << what;
  EXPECT_EQ(b.last_rank_padding, padding) << what;
}

TEST(StagePolicy, EachStagesBuffersForATenElementUnitOnThreeRanks) {
  const ShardSizes s = shard_sizes(10, 3);
  struct Row {
    std::int64_t params, params_pad, grads, grads_pad, opt, opt_pad;
  };
  const Row rows[] = {{10, 0, 10, 0, 10, 0}, {12, 2, 12, 2, 4, 2}, {12, 2, 4, 2, 4, 2}, {4, 2, 4, 2, 4, 2}};
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE(::testing::Message() << "stage " << stage);
    const StagePolicy p = make_stage_policy(at_stage(stage), 3, DType::kBF16);
    const Row& r = rows[stage];
    expect_buffer(p.params(s), r.params, r.params_pad, "params");
    expect_buffer(p.grads(s), r.grads, r.grads_pad, "grads");
    expect_buffer(p.optimizer_state(s), r.opt, r.opt_pad, "optimizer");
    EXPECT_EQ(p.pends, stage >= 2);
    EXPECT_EQ(p.publishes_params(), stage >= 1);
    EXPECT_EQ(p.grad_dtype, DType::kBF16);
    EXPECT_FALSE(p.solo);
  }
}

TEST(StagePolicy, PersistenceSoloFp32ShardsAndPerMicroBatchReductions) {
  ZeroOptions z = at_stage(3);
  z.persistence_threshold = 11;  // the 10-element unit stays whole, as at stage 2
  expect_buffer(make_stage_policy(z, 3, DType::kF32).params(shard_sizes(10, 3)), 12, 2, "persistent params");
  // One rank: no collectives; gradients straight into the shard unless an fp32 shard under bf16
  // parameters needs its pending buffer.
  const StagePolicy solo = make_stage_policy(at_stage(3), 1, DType::kBF16);
  EXPECT_TRUE(solo.solo);
  EXPECT_FALSE(solo.pends);
  EXPECT_FALSE(solo.publishes_params());
  z = at_stage(2);
  z.fp32_grad_shards = true;
  const StagePolicy fp32_shards = make_stage_policy(z, 1, DType::kBF16);
  EXPECT_EQ(fp32_shards.grad_dtype, DType::kF32);
  EXPECT_TRUE(fp32_shards.pends);
  EXPECT_EQ(make_stage_policy(z, 4, DType::kF32).grad_dtype, DType::kF32);
  EXPECT_EQ(make_stage_policy(at_stage(1), 4, DType::kBF16).grad_dtype, DType::kBF16) << "fp32 shards: stages 2-3";
  // Deterministic accumulation: stages 0-1 reduce every micro-batch on several ranks only.
  z = at_stage(1);
  z.reduce_every_micro_batch = true;
  EXPECT_TRUE(make_stage_policy(z, 2, DType::kF32).pends);
  EXPECT_FALSE(make_stage_policy(z, 1, DType::kF32).pends);
}

// Deterministic mode's fold: every unit pends at every stage and world size (one rank too), and
// stage 0 keeps a padded gradient buffer so that its folded slices gather in place.
TEST(StagePolicy, FoldingPendsEverywhereAndPadsStageZerosGradients) {
  for (int ranks : {1, 3}) {
    for (int stage = 0; stage <= 3; ++stage) {
      ZeroOptions z = at_stage(stage);
      z.fold_in_global_order = true;
      const StagePolicy p = make_stage_policy(z, ranks, DType::kBF16);
      EXPECT_TRUE(p.folds && p.pends) << stage << " on " << ranks;
    }
  }
  ZeroOptions z = at_stage(0);
  z.fold_in_global_order = true;
  expect_buffer(make_stage_policy(z, 3, DType::kF32).grads(shard_sizes(10, 3)), 12, 2, "stage 0 folding");
}

}  // namespace
}  // namespace zt
