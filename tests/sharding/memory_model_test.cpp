// The ZeRO memory prediction: the paper's Figure 1, shard sizes and padding worked by hand, the
// stages' ordering, and the single-rank stage-0 figures against what the engine really allocates.
// (A run config's prediction and the `memory` command: memory_command_test.cpp.)
#include <gtest/gtest.h>

#include <random>

#include "engine/base/core/check.h"
#include "engine/distributed/comm/local_communicator.h"
#include "engine/distributed/comm/quantized_collectives.h"
#include "engine/distributed/optim/sharded_adamw.h"
#include "engine/distributed/sharding/memory_model.h"
#include "engine/distributed/sharding/zero_param_store.h"
#include "kernels/ops.h"
#include "models/gpt/gpt_footprint.h"
#include "models/gpt/gpt_model.h"
#include "models/gpt/gpt_schedule.h"

namespace zt {
namespace {

using C = MemCategory;

const gpt::GptConfig kTiny{/*n_layer=*/2, /*n_head=*/2, /*n_embd=*/32, /*block_size=*/16, /*vocab_size=*/65};
const gpt::GptConfig kGpt2Small{12, 12, 768, 1024, 50257};
const gpt::GptConfig kGpt2Medium{24, 16, 1024, 1024, 50257};

TEST(PaperModelStates, Figure1SevenPointFiveBillionOn64Ranks) {
  const double expected[] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(predict_model_states(7'500'000'000, stage, 64).total(), expected[stage]) << "stage " << stage;
  }
  const ModelStateBytes s2 = predict_model_states(7'500'000'000, 2, 64);
  EXPECT_EQ(s2.parameters, 15e9);
  EXPECT_EQ(s2.gradients, 15e9 / 64);
  EXPECT_EQ(s2.optimizer_states, 90e9 / 64);
}

TEST(ShardSizes, CeilShardsPadTheLastRanks) {
  const ShardSizes a = shard_sizes(10, 3);  // ranks hold 4, 4, 2
  EXPECT_EQ(a.shard_numel, 4);
  EXPECT_EQ(a.padded_numel, 12);
  EXPECT_EQ(a.last_rank_padding, 2);
  const ShardSizes b = shard_sizes(5, 4);  // ranks hold 2, 2, 1, 0: the last shard is all padding
  EXPECT_EQ(b.shard_numel, 2);
  EXPECT_EQ(b.padded_numel, 8);
  EXPECT_EQ(b.last_rank_padding, 2);
  const ShardSizes c = shard_sizes(12, 3);
  EXPECT_EQ(c.shard_numel, 4);
  EXPECT_EQ(c.last_rank_padding, 0);
  const ShardSizes d = shard_sizes(7, 1);
  EXPECT_EQ(d.shard_numel, 7);
  EXPECT_EQ(d.padded_numel, 7);
  EXPECT_EQ(d.last_rank_padding, 0);
}

// Units of 10, 7 and 3 elements on 3 ranks: shards 4, 3, 1 (sum 8), rank 2 holds 2, 1, 1 of
// them (padding 2, 2, 0); the largest unit pads to 12.
ParamTable hand_table() {
  ParamTable t;
  const std::int64_t sizes[] = {10, 7, 3};
  for (int u = 0; u < 3; ++u) {
    t.add_unit("u" + std::to_string(u));
    t.add_param("p" + std::to_string(u), {sizes[u]}, {sizes[u]}, true);
  }
  return t;
}

struct Expected {
  std::int64_t params, grads, master, optimizer, comm, padding;
};

void expect_prediction(const StageMemory& m, const Expected& e, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(m[C::kParameters], e.params);
  EXPECT_EQ(m[C::kGradients], e.grads);
  EXPECT_EQ(m[C::kMasterWeights], e.master);
  EXPECT_EQ(m[C::kOptimizerStates], e.optimizer);
  EXPECT_EQ(m[C::kCommBuffers], e.comm);
  EXPECT_EQ(m[C::kActivations], 1000);
  EXPECT_EQ(m[C::kWorkspace], 500);
  EXPECT_EQ(m.padding_bytes, e.padding);
}

// A chain of three units: forward acquires and releases each in turn; backward does the same in
// reverse, each unit's gradient contributed once and ready before its release.
StepSchedule chain_schedule() {
  StepSchedule s;
  for (int u = 0; u < 3; ++u) {
    for (UnitOp op : {UnitOp::kAcquire, UnitOp::kRelease}) s.forward.push_back({op, u});
  }
  for (int u = 2; u >= 0; --u) {
    for (UnitOp op : {UnitOp::kAcquire, UnitOp::kAccumulate, UnitOp::kGradsReady, UnitOp::kRelease}) {
      s.backward.push_back({op, u});
    }
  }
  return s;
}

StageMemory predict(const ParamTable& t, DType dtype, const ModelFootprint& fp, int stage, int ranks,
                    const ShardingOptions& options = {}) {
  ZeroOptions zero;  // defaults: overlap, prefetch 1, 2 reductions in flight
  zero.stage = stage;
  return predict_rank_memory(t, dtype, fp, chain_schedule(), zero, ranks, options);
}

TEST(RankMemory, ThreeRanksThatDivideNoUnitWorkedByHand) {
  const ParamTable t = hand_table();
  const ModelFootprint fp{1000, 500};
  // Shards 4, 3, 1 (sum 8), padded units 12, 9, 3 (sum 24: 4 padding elements), last-rank shard
  // padding 2 + 2 + 0 = 4. Stages 1-2 keep whole units padded (W * 24), stage 1 its gradients too.
  // Stage 3 gathered units: u0 with u1 prefetched (12 + 9 = 21 elements) is the most at once;
  // u2 stays gathered from the end of forward into backward, then u1 and u0 are prefetched again.
  // Stages 2-3 pending full gradients: u2, u1, u0 (3 + 9 + 12 = 24) before the third reduction's
  // start makes the first one wait. Comm staging, all three reductions in flight at that moment:
  // stage 0 all-reduces fp32 copies of 3 + 7 + 10 elements; a reduce-scatter stages its fp32
  // output shard (4 s), and bf16 an fp32 copy of the padded input (4 p). Stages 2-3 reduce the
  // step's first micro-batch into the gradient shards, a later one into the store's fp32 reduced
  // shards (4 s more each). Padding: m, v shard padding 8 * 4 = 32; padded units and shards
  // 4 * W each.
  const Expected f32[] = {{80, 80, 0, 160, 80, 0},
                          {96, 96, 0, 64, 4 * 8, 32 + 16 + 16},
                          {96, 32 + 4 * 24, 0, 64, 4 * 8, 32 + 16 + 16},
                          {32 + 4 * 21, 32 + 4 * 24, 0, 64, 4 * 8, 32 + 16 + 16}};
  const Expected bf16[] = {{40, 40, 80, 160, 80, 0},
                           {48, 48, 32, 64, 4 * 8 + 4 * 24, 48 + 8 + 8},
                           {48, 16 + 2 * 24, 32, 64, 4 * 8 + 4 * 24, 48 + 8 + 8},
                           {16 + 2 * 21, 16 + 2 * 24, 32, 64, 4 * 8 + 4 * 24, 48 + 8 + 8}};
  for (int stage = 0; stage < 4; ++stage) {
    expect_prediction(predict(t, DType::kF32, fp, stage, 3), f32[stage], "f32 stage " + std::to_string(stage));
    expect_prediction(predict(t, DType::kBF16, fp, stage, 3), bf16[stage], "bf16 stage " + std::to_string(stage));
  }
  // Deterministic reductions stage more: an all-reduce holds the padded unit twice plus a shard
  // (4 (2 p + s) summed over the three units: 28 + 84 + 112); a reduce-scatter adds the
  // all-to-all chunks (4 p: 4 * 24).
  ShardingOptions det;
  det.deterministic = true;
  EXPECT_EQ(predict(t, DType::kF32, fp, 0, 3, det)[C::kCommBuffers], 224);
  EXPECT_EQ(predict(t, DType::kF32, fp, 2, 3, det)[C::kCommBuffers], 4 * 8 + 4 * 24);
  // Two micro-batches: the second's reductions add the store's reduced shards (4 s: 32 bytes).
  ShardingOptions accum;
  accum.grad_accum = 2;
  for (int stage = 2; stage < 4; ++stage) {
    EXPECT_EQ(predict(t, DType::kF32, fp, stage, 3, accum)[C::kCommBuffers], 8 * 8) << stage;
    EXPECT_EQ(predict(t, DType::kBF16, fp, stage, 3, accum)[C::kCommBuffers], 8 * 8 + 4 * 24) << stage;
  }
  det.grad_accum = 2;
  EXPECT_EQ(predict(t, DType::kF32, fp, 2, 3, det)[C::kCommBuffers], 8 * 8 + 4 * 24);
}

// NCCL (device cuda) stages only what is not fp32 on the device already, by hand for the same
// three units, all three reductions in flight: f32 stages nothing (stages 2-3 reduce the first
// micro-batch into the shards; a later one into the store's reduced shards, 4 s = 32); bf16
// stages an fp32 copy of each unit (stage 0: 4 n = 80; stages 1-3: the padded unit, 4 p = 96) and
// at stages 1-3 the fp32 result for the bf16 shard or slice (4 s = 32; stages 2-3 later: the
// store's reduced shard instead). A world of one stages nothing at any stage, whatever the backend: its store calls no
// collective.
TEST(RankMemory, NcclStagingWorkedByHand) {
  const ParamTable t = hand_table();
  const ModelFootprint fp{1000, 500};
  ShardingOptions nccl;
  nccl.backend = CollectiveBackend::kNccl;
  const std::int64_t f32[] = {0, 0, 0, 0}, bf16[] = {4 * 20, 4 * 24 + 4 * 8, 4 * 8 + 4 * 24, 4 * 8 + 4 * 24};
  ShardingOptions nccl_accum = nccl;
  nccl_accum.grad_accum = 3;
  const std::int64_t f32_accum[] = {0, 0, 4 * 8, 4 * 8};
  for (int stage = 0; stage < 4; ++stage) {
    SCOPED_TRACE(stage);
    EXPECT_EQ(predict(t, DType::kF32, fp, stage, 3, nccl)[C::kCommBuffers], f32[stage]);
    EXPECT_EQ(predict(t, DType::kBF16, fp, stage, 3, nccl)[C::kCommBuffers], bf16[stage]);
    EXPECT_EQ(predict(t, DType::kF32, fp, stage, 3, nccl_accum)[C::kCommBuffers], f32_accum[stage]);
    EXPECT_EQ(predict(t, DType::kBF16, fp, stage, 3, nccl_accum)[C::kCommBuffers], bf16[stage]);
  }
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(predict(t, DType::kBF16, fp, stage, 1, nccl)[C::kCommBuffers], 0) << stage;
    EXPECT_EQ(predict(t, DType::kBF16, fp, stage, 1)[C::kCommBuffers], 0) << stage;
  }
}

// Quantized gathers at stages 1-2 on NCCL with fp32 parameters: no reduction stages anything, so the
// comm buffers' peak is the publish's, one unit at a time: the largest shard's int8 staging.
TEST(RankMemory, AQuantizedPublishIsTheCommBuffersPeakWhereNoReductionStages) {
  const ParamTable t = hand_table();
  const ModelFootprint fp{1000, 500};
  ShardingOptions nccl;
  nccl.backend = CollectiveBackend::kNccl;
  for (int stage = 1; stage <= 2; ++stage) {
    SCOPED_TRACE(stage);
    ZeroOptions zero;
    zero.stage = stage;
    zero.gather_wire = WireDType::kInt8;
    const StageMemory m = predict_rank_memory(t, DType::kF32, fp, chain_schedule(), zero, 3, nccl);
    EXPECT_GT(all_gather_int8_staging_bytes(4, 3), 0);
    EXPECT_EQ(m.publish_comm_bytes, all_gather_int8_staging_bytes(4, 3));  // shards 4, 3, 1
    EXPECT_EQ(m[C::kCommBuffers], m.publish_comm_bytes);
  }
}

// Hybrid sharding on NCCL (2 groups of 3 ranks): the hop across the groups is queued with the first
// ([Note: the second hop, queued at once on the device]), so its staging, an fp32 copy of a bf16
// result the store does not keep pending (the unit at stage 0, the shard at stage 1), is held beside
// the first hop's, all three reductions in flight at once: stage 0 twice the fp32 unit copies
// (2 x 4 x 20), stage 1 the fp32 shards once more (4 x 8) over one group's staging above; stages
// 2-3, whose gradients pend, and fp32 gradients stage nothing more. By hand; NCCL across groups has
// not run (no machine with several GPUs yet), so no measurement stands beside it.
TEST(RankMemory, NcclHybridHoldsTheSecondHopsStagingFromItsStart) {
  const ParamTable t = hand_table();
  const ModelFootprint fp{1000, 500};
  ShardingOptions hybrid;
  hybrid.backend = CollectiveBackend::kNccl;
  hybrid.replica_groups = 2;
  const std::int64_t bf16[] = {2 * 4 * 20, 4 * 24 + 4 * 8 + 4 * 8, 4 * 8 + 4 * 24, 4 * 8 + 4 * 24};
  for (int stage = 0; stage < 4; ++stage) {
    SCOPED_TRACE(stage);
    EXPECT_EQ(predict(t, DType::kBF16, fp, stage, 3, hybrid)[C::kCommBuffers], bf16[stage]);
    EXPECT_EQ(predict(t, DType::kF32, fp, stage, 3, hybrid)[C::kCommBuffers], 0);
  }
}

// One rank at stages 1-3 (ZeroParamStore's solo path): the shard is the whole unit, nothing is
// gathered, gradients go straight into the gradient buffer, nothing is staged: stage 0's bytes,
// by hand for the units of 10, 7 and 3 elements (20). Only fp32 gradient shards under bf16
// parameters keep each unit's bf16 pending gradient (2 n, all three at once before the third
// reduction's start finishes the first: 2 * 20 = 40), beside fp32 shards of 4 * 20; it is widened
// straight into the shard (the first micro-batch) or into an fp32 buffer in comm_buffers added
// to it (a later one: 4 * 20 = 80).
TEST(RankMemory, OneRankAtEveryStageDoesStageZerosWorkWorkedByHand) {
  const ParamTable t = hand_table();
  const ModelFootprint fp{1000, 500};
  for (int stage = 0; stage < 4; ++stage) {
    expect_prediction(predict(t, DType::kF32, fp, stage, 1), {80, 80, 0, 160, 0, 0},
                      "f32 stage " + std::to_string(stage));
    expect_prediction(predict(t, DType::kBF16, fp, stage, 1), {40, 40, 80, 160, 0, 0},
                      "bf16 stage " + std::to_string(stage));
  }
  for (int stage = 2; stage < 4; ++stage) {
    ZeroOptions zero;
    zero.stage = stage;
    zero.fp32_grad_shards = true;
    expect_prediction(predict_rank_memory(t, DType::kBF16, fp, chain_schedule(), zero, 1), {40, 80 + 40, 80, 160, 0, 0},
                      "bf16, fp32 gradient shards, stage " + std::to_string(stage));
    ShardingOptions accum;
    accum.grad_accum = 2;
    expect_prediction(predict_rank_memory(t, DType::kBF16, fp, chain_schedule(), zero, 1, accum),
                      {40, 80 + 40, 80, 160, 80, 0},
                      "bf16, fp32 gradient shards, 2 micro-batches, stage " + std::to_string(stage));
  }
}

TEST(RankMemory, ZeroOptionsMoveTheTransientBuffersAsWorkedByHand) {
  const ParamTable t = hand_table();
  const ModelFootprint fp{1000, 500};
  const auto with = [&](auto edit) {
    ZeroOptions zero;
    zero.stage = 3;
    edit(zero);
    return predict_rank_memory(t, DType::kF32, fp, chain_schedule(), zero, 3);
  };
  // No prefetch: one gathered unit at a time (the largest, 12); no overlap: also one pending
  // gradient and one reduction's staging at a time (u0: 12 elements; its output shard 4 s = 16
  // bytes, the step's first reduction landing in the gradient shard).
  EXPECT_EQ(with([](ZeroOptions& z) { z.prefetch_units = 0; })[C::kParameters], 32 + 4 * 12);
  const StageMemory sync = with([](ZeroOptions& z) { z.overlap_comm = false; });
  EXPECT_EQ(sync[C::kParameters], 32 + 4 * 12);
  EXPECT_EQ(sync[C::kGradients], 32 + 4 * 12);
  EXPECT_EQ(sync[C::kCommBuffers], 4 * 4);
  // One reduction in flight: two pending gradients at most (u1 + u0 = 21).
  EXPECT_EQ(with([](ZeroOptions& z) { z.max_inflight_reductions = 1; })[C::kGradients], 32 + 4 * 21);
  // Bounded by bytes (pending u2, u1, u0: 12, 36, 48 bytes in backward order): 40 bytes in flight
  // waits u2 when u1 is ready and u1 when u0 is, so u1 + u0 (21) pend at once at most; 1 byte
  // waits each at once, one pending at a time (u0, 12); 50 bytes lets u2 and u1 fly together, as
  // the default count does (all three, 24, when u0 contributes).
  const auto bytes = [&](std::int64_t b) {
    return with([b](ZeroOptions& z) { z.max_inflight_reduction_bytes = b; })[C::kGradients];
  };
  EXPECT_EQ(bytes(40), 32 + 4 * 21);
  EXPECT_EQ(bytes(1), 32 + 4 * 12);
  EXPECT_EQ(bytes(50), 32 + 4 * 24);
  EXPECT_EQ(with([](ZeroOptions&) {})[C::kGradients], 32 + 4 * 24);
  // Keeping units for backward: all three gathered at the end of forward (24).
  EXPECT_EQ(with([](ZeroOptions& z) { z.reshard_after_forward = false; })[C::kParameters], 32 + 4 * 24);
  // Units under 5 elements persist whole (u2: padded 3 instead of shard 1); gathers of the others
  // reach u0 + u1 = 21 as before.
  EXPECT_EQ(with([](ZeroOptions& z) { z.persistence_threshold = 5; })[C::kParameters], 4 * (4 + 3 + 3) + 4 * 21);
  // fp32 gradient shards cost the same as working ones in f32; in bf16 they double the shard.
  ZeroOptions fp32_shards;
  fp32_shards.stage = 2;
  fp32_shards.fp32_grad_shards = true;
  EXPECT_EQ(predict_rank_memory(t, DType::kBF16, fp, chain_schedule(), fp32_shards, 3)[C::kGradients], 4 * 8 + 2 * 24);
}

// A tied unit, as GPT's embeddings: u0 is used first and last in forward (u0, u1, then u2 with
// u0 again), and its gradient comes twice in backward, the head's right away and the
// embedding's at the end. Reduced in one round, its pending gradient waits through the whole
// backward; reduced in two (a grads_ready after each contribution), each round pends only until
// its own reduction.
StepSchedule tied_schedule(bool two_rounds) {
  StepSchedule s;
  using enum UnitOp;
  s.forward = {{kAcquire, 0}, {kRelease, 0}, {kAcquire, 1}, {kRelease, 1},
               {kAcquire, 2}, {kAcquire, 0}, {kRelease, 0}, {kRelease, 2}};
  s.backward = {{kAcquire, 0}, {kAccumulate, 0}};
  if (two_rounds) s.backward.push_back({kGradsReady, 0});
  for (UnitEvent e : std::initializer_list<UnitEvent>{{kRelease, 0},
                                                      {kAcquire, 2},
                                                      {kAccumulate, 2},
                                                      {kGradsReady, 2},
                                                      {kRelease, 2},
                                                      {kAcquire, 1},
                                                      {kAccumulate, 1},
                                                      {kGradsReady, 1},
                                                      {kRelease, 1},
                                                      {kAccumulate, 0},
                                                      {kGradsReady, 0}}) {
    s.backward.push_back(e);
  }
  return s;
}

TEST(RankMemory, ATiedUnitReducedInTwoRoundsWorkedByHand) {
  const ParamTable t = hand_table();
  const ModelFootprint fp{1000, 500};
  const auto with = [&](int stage, bool two_rounds, int inflight) {
    ZeroOptions zero;
    zero.stage = stage;
    zero.max_inflight_reductions = inflight;
    return predict_rank_memory(t, DType::kF32, fp, tied_schedule(two_rounds), zero, 3);
  };
  // Stage 2, one reduction in flight, pending bytes (W p: u0 48, u2 12, u1 36) in backward order.
  // One round: u0 48, + u2 60, + u1 96 (u2's reduction is waited only at u1's grads_ready), then
  // u0's second contribution adds into its pending buffer: peak 96. Two rounds: u0 48 (its
  // reduction starts), + u2 60, u2's grads_ready waits u0's round: 12, + u1 48, waits u2: 36,
  // u0's second round + 48: 84.
  EXPECT_EQ(with(2, false, 1)[C::kGradients], 32 + 96);
  EXPECT_EQ(with(2, true, 1)[C::kGradients], 32 + 84);
  // Comm staging at stage 2, two rounds, one in flight: each unit's first reduction lands in its
  // shard (MPI's output staging, 4 s: u0 16, u2 4, u1 12), u0's second round adds the store's
  // reduced shard (8 s = 32): u0 16, + u2 20 (waits u0: 4), + u1 16 (waits u2: 12), + u0 44
  // (waits u1): peak 44.
  EXPECT_EQ(with(2, true, 1)[C::kCommBuffers], 44);
  // On several ranks stage 0 reduces each round of u0 from a pending buffer too (W p = 48), so that
  // every stage adds the same two reduced terms: its fixed 80 bytes of gradients, + 48 pending.
  // Staging, two in flight: u0's round all-reduces an fp32 copy (4 n = 40) staged again by the
  // host all-reduce (40): 80, + u2 12, + u1 28 = 120 (u0's first round then waits), + u0 80 - 80.
  const StageMemory stage0 = with(0, true, 2);
  EXPECT_EQ(stage0[C::kGradients], 80 + 48);
  EXPECT_EQ(stage0[C::kCommBuffers], 120);
  // Stage 0 reducing u0 once pends nothing: its fixed bytes only.
  EXPECT_EQ(with(0, false, 2)[C::kGradients], 80);
}

// Deterministic mode's fold (global_order_fold.h), the tied schedule in two rounds on 3 ranks, one
// reduction in flight: u0's first round stays pending for its last, then every unit's pending
// buffer (W p: u0 48, u2 12, u1 36) goes out whole and the exchange receives W p in the pending
// dtype (plus an fp32 shard, 4 s, to widen a bf16 part). f32 stage 2: pending u0 48, + u2 60
// (its exchange: comm 12), + u1 96 (comm 48, then u2 is folded: 84 and 36), u0's second
// contribution into its buffer, its exchange: comm 84 (then u1 folded). Gradients 32 + 96, comm
// 84; stage 0 the same but its gradient buffer padded (4 * 24 = 96). bf16 stage 2: pending peak
// 24 + 6 + 18 = 48 beside 2 * 8; comm u2 6 + 4, u1 18 + 12 (40), u0 24 + 16 after u2's fold: 70.
// One rank exchanges nothing: f32 stages nothing at all, bf16 only the widening.
TEST(RankMemory, FoldingInGlobalOrderWorkedByHand) {
  const ParamTable t = hand_table();
  const ModelFootprint fp{1000, 500};
  const auto with = [&](int stage, DType dtype, int ranks) {
    ZeroOptions zero;
    zero.stage = stage;
    zero.max_inflight_reductions = 1;
    zero.fold_in_global_order = true;
    return predict_rank_memory(t, dtype, fp, tied_schedule(true), zero, ranks);
  };
  EXPECT_EQ(with(2, DType::kF32, 3)[C::kGradients], 32 + 96);
  EXPECT_EQ(with(2, DType::kF32, 3)[C::kCommBuffers], 84);
  EXPECT_EQ(with(0, DType::kF32, 3)[C::kGradients], 96 + 96);
  EXPECT_EQ(with(0, DType::kF32, 3)[C::kCommBuffers], 84);
  EXPECT_EQ(with(2, DType::kBF16, 3)[C::kGradients], 16 + 48);
  EXPECT_EQ(with(2, DType::kBF16, 3)[C::kCommBuffers], 70);
  // One rank, units whole (10, 7, 3): pending u0 40, + u2 52, + u1 80 before u2 is folded.
  EXPECT_EQ(with(3, DType::kF32, 1)[C::kGradients], 80 + 80);
  EXPECT_EQ(with(3, DType::kF32, 1)[C::kCommBuffers], 0);
  EXPECT_EQ(with(3, DType::kBF16, 1)[C::kCommBuffers], 4 * 7 + 4 * 10) << "u1's and u0's widenings";
}

// One rank at stages 1-3 calls no collective and keeps no full-unit buffer beside the shard (the
// solo path), so every stage costs stage 0's bytes for the GPT as well.
TEST(RankMemory, OneRankStagesAllCostStageZerosBytes) {
  const ParamTable t = gpt::build_param_table(kTiny);
  const StepSchedule schedule{gpt::forward_schedule(kTiny), gpt::backward_schedule(kTiny)};
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const std::int64_t W = static_cast<std::int64_t>(dtype_size_bytes(dtype));
    const ModelFootprint fp = gpt::predict_footprint(kTiny, 4, 16, {}, dtype, Device::kCPU);
    StageMemory s[4];
    for (int stage = 0; stage < 4; ++stage) {
      ZeroOptions zero;
      zero.stage = stage;
      s[stage] = predict_rank_memory(t, dtype, fp, schedule, zero, 1);
      EXPECT_EQ(s[stage].padding_bytes, 0);
      EXPECT_EQ(s[stage][C::kActivations], fp.activation_bytes);
      EXPECT_EQ(s[stage][C::kWorkspace], fp.workspace_bytes);
      EXPECT_EQ(s[stage][C::kCommBuffers], 0) << stage;
      EXPECT_EQ(s[stage].model_state_bytes(), (2 * W + (dtype == DType::kBF16 ? 12 : 8)) * t.total_numel()) << stage;
    }
  }
}

// From 4 ranks on. With fewer, stage 2 can exceed stage 1 for GPT-2: the overlap keeps the tied
// embedding's full pending gradient (38.6M elements, alive through backward) beside two blocks'
// and the staging of three reduce-scatters in flight, which outweighs the part of the gradients
// that sharding saves at 2-3 ranks (the price of overlap, as DeepSpeed's overlap_comm buckets).
TEST(RankMemory, EachStageNeedsNoMoreThanTheLastForGpt2OnFourOrMoreRanks) {
  for (const gpt::GptConfig& model : {kGpt2Small, kGpt2Medium}) {
    const ParamTable t = gpt::build_param_table(model);
    const StepSchedule schedule{gpt::forward_schedule(model), gpt::backward_schedule(model)};
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const ModelFootprint fp = gpt::predict_footprint(model, 8, 1024, {}, dtype, Device::kCPU);
      for (int ranks : {4, 7, 8, 64, 1000}) {
        std::int64_t previous = 0;
        for (int stage = 0; stage < 4; ++stage) {
          ZeroOptions zero;
          zero.stage = stage;
          const std::int64_t total = predict_rank_memory(t, dtype, fp, schedule, zero, ranks).total_bytes();
          if (stage == 0) previous = total;
          EXPECT_LE(total, previous) << "n_layer " << model.n_layer << " stage " << stage << " ranks " << ranks;
          previous = total;
        }
      }
    }
  }
}

// One optimizer step on one rank, measured by the tracker, against the stage-0 prediction at N=1.
void expect_measured_equals_predicted(DType dtype, DType activations, const char* checkpointing) {
  SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " parameters, " << dtype_name(activations)
                                    << " activations, activation_checkpointing=" << checkpointing);
  gpt::CheckpointPolicy policy;
  ASSERT_TRUE(gpt::CheckpointPolicy::parse(checkpointing, &policy));
  const int B = 4, T = 16;
  MemoryTracker tracker;
  const ExecContext ctx{Device::kCPU, 2, nullptr};
  gpt::GptModel model(kTiny, B, T, policy, tracker, ctx, 0.0f, 0, activations);
  LocalCommunicator comm(tracker, {});
  ZeroParamStore store(model.table(), dtype, ZeroOptions{}, comm, tracker, ctx);
  ShardedAdamW optimizer(store, AdamWHyper{}, tracker, ctx);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(0, kTiny.vocab_size - 1);
  std::vector<std::int32_t> inputs(B * T), targets(B * T);
  for (auto& x : inputs) x = token(rng);
  for (auto& x : targets) x = token(rng);
  store.begin_step();
  model.forward(store, inputs.data(), targets.data());
  model.backward(store);
  optimizer.step(1e-3f);
  const MemorySnapshot measured = tracker.snapshot();

  const StageMemory predicted = predict_rank_memory(
      model.table(), dtype, gpt::predict_footprint(kTiny, B, T, policy, dtype, Device::kCPU, activations),
      {gpt::forward_schedule(kTiny), gpt::backward_schedule(kTiny)}, ZeroOptions{}, 1);
  for (int i = 0; i < kNumMemCategories; ++i) {
    EXPECT_EQ(measured.peak_bytes[i], predicted.bytes[i]) << mem_category_name(static_cast<MemCategory>(i));
  }
  EXPECT_LE(measured.total_peak_bytes, predicted.total_bytes());
}

TEST(RankMemory, OneRankStageZeroEqualsWhatTheEngineAllocates) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (DType activations : {DType::kF32, DType::kBF16}) {
      for (const char* checkpointing : {"none", "all"})
        expect_measured_equals_predicted(dtype, activations, checkpointing);
    }
  }
}

}  // namespace
}  // namespace zt
